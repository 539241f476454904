"""The ``skyrl_gym`` environment the ``skyrl`` adapter's rows use: a NeMo Gym row over the stack's
resources server, registered the way SkyRL registers its environments (``skyrl_gym.register``).

SkyRL's generator owns the multi-turn loop; an environment only answers each model output.
Here it does what the agent's side of NeMo Gym's contract does with a resources server (as the
embedded ``simple_agent`` does): ``init`` seeds a session for the row (``POST /seed_session``, its
cookie kept for every later call); ``step`` runs a Hermes ``<tool_call>`` against
``POST /<tool>`` and hands the answer back as a ``tool`` observation (a non-2xx answer's text
too, as NeMo Gym passes it to the model), or, when the output calls no tool or the row's
``max_turns`` is used up, verifies the final text (``POST /verify``, the row plus a Responses-API
``response``) and ends the episode with the verifier's reward. A ``/seed_session`` or ``/verify``
that fails, or a server that cannot be reached, raises out of ``init``/``step``: inside SkyRL's
``agent_loop``, the one trajectory's exception, for SkyRL to handle as it does.

Every call carries the trajectory's ``X-Session-ID``, the header SkyRL's inference client puts on
each model call of that trajectory (``agent_loop``'s ``session_id``), beside the row's
``_rowidx`` in ``/seed_session``: the fault layer learns from it which row SkyRL's token-id model
calls belong to. SkyRL's own environments send no such header; nothing in SkyRL reads it here.
In a GRPO group every sample is a copy of one prompt's extras; the adapter's generator hook sets
each copy's ``row`` and ``session_id`` (its own ``_rowidx``, its trajectory's id) before ``init``.

Each request is also written to the collection's History as the environment's own record of it
(``collector.client_record``: the link, the route, the row, and what it raised, which goes on
unchanged), as NeMo Gym's client records each ``/run``: a link taken ``down`` refuses its
connections before the fault layer records them, and only this record shows the requests it
failed. SkyRL's extras are deep-copied, so they carry the History's key (``RECORDER``, from
``recorder``), not the History.

SkyRL runs ``init``, ``step`` and ``close`` in its environment thread pool
(``environment.skyrl_gym.max_env_workers``), so the calls are synchronous, each with the
context's request deadline. The class is built on first use (``env_class``): importing this
module imports nothing of SkyRL.
"""

from __future__ import annotations

import importlib
import json
import urllib.error
import urllib.request
import uuid
import weakref
from collections.abc import Mapping
from http.cookies import SimpleCookie
from typing import Any, Final

from pytest_rollout_chaos.collector.client_record import recorded
from pytest_rollout_chaos.collector.gym_client import GymRequestError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.gym import tasks

ENV_ID: Final = "rollout_chaos_gym_row"
ROW: Final = "row"
ROWS: Final = "group_rows"  # the prompt's group; the adapter's generator hook picks ROW from it
RESOURCES_URL: Final = "resources_url"
TIMEOUT_S: Final = "request_timeout_s"
EOS_TEXT: Final = "eos_text"
SESSION_ID: Final = "session_id"
SESSION_HEADER: Final = "X-Session-ID"
RECORDER: Final = "recorder"  # the key of the History the requests are recorded in (``recorder``)
LINK: Final = "collector->resources"
_SERVER: Final = "resources"
_RECORDERS: Final[weakref.WeakValueDictionary[str, History]] = weakref.WeakValueDictionary()


def recorder(history: History) -> str:
    """The key an environment's extras carry (``RECORDER``) to record its requests in ``history``,
    for as long as ``history`` lives."""
    key = uuid.uuid4().hex
    _RECORDERS[key] = history
    return key


class GymRowEnvironment:
    """The environment's behaviour; ``env_class`` mixes it into SkyRL's ``BaseTextEnv``."""

    turns: int
    max_turns: int

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        given = dict(extras or {})
        missing = [key for key in (ROW, RESOURCES_URL, TIMEOUT_S, "max_turns") if key not in given]
        if missing:
            raise ValueError(f"{ENV_ID}: env_extras lacks {', '.join(missing)} (the adapter sets them)")
        self.row: dict[str, Any] = dict(given[ROW])
        self.resources_url = str(given[RESOURCES_URL]).rstrip("/")
        self.timeout_s = float(given[TIMEOUT_S])
        self.eos_text = str(given.get(EOS_TEXT) or "")
        self.session_id = str(given.get(SESSION_ID) or "")
        self.max_turns = int(given["max_turns"])
        self.recorder = str(given.get(RECORDER) or "")
        self.cookie = ""

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        status, text, cookie = self._post("/seed_session", self.row)
        if status >= 300:
            raise GymRequestError(_SERVER, self.resources_url + "/seed_session", status, text)
        self.cookie = cookie
        return prompt, {}

    def step(self, action: str) -> dict[str, Any]:
        self.turns += 1
        text = action.removesuffix(self.eos_text) if self.eos_text else action
        calls = _tool_calls(text)
        if calls and self.turns < self.max_turns:
            name, arguments = calls[0]
            _, answer, _ = self._post(f"/{name}", arguments)
            observation = {"role": "tool", "content": _as_text(answer)}
            return {"observations": [observation], "reward": 0.0, "done": False, "metadata": {}}
        final = tasks.text_without_tool_calls(text)
        response = {
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": final}],
                }
            ]
        }
        url = self.resources_url + "/verify"
        status, answer, _ = self._post("/verify", {**self.row, "response": response})
        if status >= 300:
            raise GymRequestError(_SERVER, url, status, answer)
        try:
            reward = float(json.loads(answer)["reward"])
        except (ValueError, KeyError, TypeError) as error:
            raise GymRequestError(
                _SERVER, url, status, f"answer has no number 'reward': {error!r}"
            ) from error
        return {"observations": [], "reward": reward, "done": True, "metadata": {}}

    def _post(self, path: str, body: Mapping[str, Any]) -> tuple[int, str, str]:
        """POST ``body``; the status, the body text and the session cookie the answer set."""
        request = urllib.request.Request(
            self.resources_url + path,
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                **({"Cookie": self.cookie} if self.cookie else {}),
                **({SESSION_HEADER: self.session_id} if self.session_id else {}),
            },
            method="POST",
        )
        with recorded(_RECORDERS.get(self.recorder), LINK, path, self.row.get("_rowidx")):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                    return (
                        answer.status,
                        answer.read().decode(errors="replace"),
                        _session_cookie(answer.headers),
                    )
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode(errors="replace"), ""


def _tool_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The Hermes tool calls in a model output; an unparsable call is no call (the text is the
    answer, as a chat parser leaves it)."""
    try:
        return tasks.parse_tool_calls(text)
    except (tasks.TaskError, ValueError):
        return []


def _as_text(answer: str) -> str:
    """A tool's JSON answer as the text the model sees: a JSON string unquoted, anything else as is."""
    try:
        decoded = json.loads(answer)
    except ValueError:
        return answer
    return decoded if isinstance(decoded, str) else json.dumps(decoded)


def _session_cookie(headers: Any) -> str:
    pairs = []
    for header in headers.get_all("Set-Cookie") or []:
        cookie: SimpleCookie = SimpleCookie()
        cookie.load(header)
        pairs += [f"{name}={morsel.value}" for name, morsel in cookie.items()]
    return "; ".join(pairs)


def env_class() -> type[Any]:
    """``GymRowEnvironment`` on SkyRL's ``BaseTextEnv``, registered as ``ENV_ID`` (once)."""
    base: Any = importlib.import_module("skyrl_gym.envs.base_text_env").BaseTextEnv
    registration: Any = importlib.import_module("skyrl_gym.envs.registration")
    existing = registration.registry.get(ENV_ID)
    if existing is not None and isinstance(existing.entry_point, type):
        found: type[Any] = existing.entry_point
        return found
    made = type("RolloutChaosGymRowEnv", (GymRowEnvironment, base), {"__module__": __name__})
    registration.register(id=ENV_ID, entry_point=made)
    return made
