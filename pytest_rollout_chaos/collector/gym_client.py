"""The Gym client collectors use: NeMo Gym's ``run_examples`` contract, and its unforgiving transport.

``GymClient.run_examples(rows)`` behaves like ``RolloutCollectionHelper.run_examples``: every
row is POSTed to ``/run`` on the agent its ``agent_ref.name`` names (addresses from the head
server's ``/global_config_dict_yaml``, or given), all requests start at once, and it returns
one awaitable per row in completion order, each giving ``(row, result)``.

The transport is NeMo Gym 0.4.0's (``nemo_gym.server_utils.request`` with ``_internal=True``,
which ``ServerClient.post`` uses for ``/run``): no deadline at all, and any error before the
answer's head arrives (disconnect, refused or reset connection) is retried every
``RETRY_SLEEP_S`` without limit; a dead or frozen agent makes an awaitable wait forever, as it
does in a trainer. Deadlines are the collector's job; ``timeout_s`` is an opt-in one for
callers that want it. What comes after the head fails at once, as upstream's
``raise_for_status`` / ``get_response_json`` do: a ``GymRequestError`` naming the server, the
URL, the status and why.

The ``short_results`` fault arms the next call to yield fewer awaitables than rows (the
"empty epochs" condition of NVIDIA-NeMo/RL #2305). With a History, each request is recorded
as ``collector invoke/ok/fail run`` with the row index, and each retry as ``collector info
run_retry`` with the attempt and the error, so a hang's story shows what it kept retrying. A
closed client sends nothing more: a call then is refused and recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import Any, Final

import aiohttp
import yaml

from pytest_rollout_chaos.errors import ChaosError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.http_client import SessionOwner

Result = tuple[dict[str, Any], dict[str, Any]]
_BODY_CHARS = 500
RETRY_SLEEP_S: Final = 0.5
"""Upstream's fixed pause between tries (``nemo_gym.server_utils.request``, 0.4.0)."""


class GymRequestError(ChaosError):
    """A Gym server failed a request: which server, which URL, what status, and why."""

    def __init__(self, server: str, url: str, status: int | None, reason: str) -> None:
        self.server = server
        self.url = url
        self.status = status
        self.reason = reason
        status_text = f"HTTP {status}" if status is not None else "no HTTP status"
        super().__init__(f"{server} ({url}) failed: {status_text}: {reason}")

    def __reduce__(self) -> tuple[type[GymRequestError], tuple[str, str, int | None, str]]:
        # Pickled as its four fields (a Ray actor's exception crosses processes so).
        return type(self), (self.server, self.url, self.status, self.reason)


class GymClient(SessionOwner):
    """RolloutCollectionHelper-compatible client: no deadline of its own unless ``timeout_s`` is given.

    ``timeout_s`` (opt-in, default None as upstream): each awaitable fails with a
    ``GymRequestError`` once that long has passed, retries included.
    """

    def __init__(
        self,
        head_url: str,
        *,
        timeout_s: float | None = None,
        history: History | None = None,
        agent_urls: Mapping[str, str] | None = None,
    ) -> None:
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {timeout_s!r}")
        self.head_url = head_url.rstrip("/")
        self.timeout_s = timeout_s
        self.history = history
        self._agent_urls: dict[str, str] | None = dict(agent_urls) if agent_urls is not None else None
        self._config_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task[Result]] = set()
        self._short_by = 0
        self._closed = False

    # -- faults ---------------------------------------------------------------------------------
    def short_results(self, count: int) -> None:
        """Arm the short-results fault: the next ``run_examples`` yields ``count`` fewer awaitables."""
        if count < 0:
            raise ValueError(f"short_results count must be >= 0, got {count}")
        self._short_by = count

    # -- the contract ---------------------------------------------------------------------------
    def run_examples(self, rows: Sequence[Mapping[str, Any]]) -> Iterator[Awaitable[Result]]:
        """Start one ``/run`` per row now; yield awaitables of ``(row, result)`` in completion order.

        Must be called inside a running event loop (as NeMo Gym's must), and before ``close``: a
        call after it is refused and recorded (``collector info run_examples_after_close``), the
        trace of work a collector left running after its collection ended.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("GymClient.run_examples must be called inside a running event loop") from None
        if self._closed:
            indices = [row.get("_rowidx") for row in rows]
            self._record("info", {"rows": indices}, "run_examples_after_close")
            raise RuntimeError(
                f"GymClient is closed: the collection it served is over, so rows {indices} are not sent"
            )
        for position, row in enumerate(rows):
            _agent_name(row, position)  # fail fast on a malformed row, before anything is sent
        done: asyncio.Queue[asyncio.Task[Result]] = asyncio.Queue()
        for row in rows:
            task = loop.create_task(self._run_one(dict(row)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(done.put_nowait)
            task.add_done_callback(_retrieve_exception)
        count = self.results_to_yield(len(rows))
        return (self._next_done(done) for _ in range(count))

    def results_to_yield(self, requested: int) -> int:
        """How many of ``requested`` results a ``run_examples`` call hands back: all of them, or
        fewer once ``short_results`` armed it (disarmed by this call and recorded, what the fault
        touched). A client that wraps another's ``run_examples`` asks it here, so the fault acts there."""
        count = max(0, requested - self._short_by)
        if self._short_by and self.history is not None:  # what the fault touched, for the judge
            self.history.append("collector", "info", "short_results", {"rows": requested, "yielded": count})
        self._short_by = 0
        return count

    async def _next_done(self, done: asyncio.Queue[asyncio.Task[Result]]) -> Result:
        task = await done.get()
        return task.result()

    async def _run_one(self, row: dict[str, Any]) -> Result:
        row_index = row.get("_rowidx")
        agent = _agent_name(row, 0)
        data: dict[str, Any] = {"row": row_index, "agent": agent}
        self._record("invoke", data)
        url = f"(agent {agent!r})"
        try:
            async with asyncio.timeout(self.timeout_s):
                url = (await self._agent_url(agent)) + "/run"
                result = await self._post_run(agent, url, row, data)
        except TimeoutError as error:
            timed_out = GymRequestError(agent, url, None, f"no answer within timeout_s={self.timeout_s} s")
            self._record("fail", {**data, "server": agent, "status": None, "error": str(timed_out)})
            raise timed_out from error
        except GymRequestError as error:
            self._record(
                "fail", {**data, "server": error.server, "status": error.status, "error": str(error)}
            )
            raise
        except asyncio.CancelledError:
            self._record("info", {**data, "error": "cancelled"})
            raise
        if not isinstance(result, dict):
            shape_error = GymRequestError(
                agent, url, 200, f"/run answered {type(result).__name__}, expected an object"
            )
            self._record("fail", {**data, "server": agent, "status": 200, "error": str(shape_error)})
            raise shape_error
        self._record("ok", {**data, "reward": result.get("reward")})
        return row, result

    # -- plumbing -------------------------------------------------------------------------------
    def _record(self, kind: Any, data: dict[str, Any], op: str = "run") -> None:
        if self.history is not None:
            self.history.append("collector", kind, op, data)

    def _client(self) -> aiohttp.ClientSession:
        # No timeouts and no cookies, as upstream's global client (``set_global_aiohttp_client``).
        return self._http(aiohttp.ClientTimeout(), aiohttp.DummyCookieJar())

    async def agent_url(self, agent: str) -> str:
        """The base URL ``agent`` is reached at (from the head server's config, read once), as a
        collector may want it to ask the agent itself; ``GymRequestError`` for an unknown name."""
        return await self._agent_url(agent)

    async def _agent_url(self, agent: str) -> str:
        if self._agent_urls is None:
            if self._config_lock is None:
                self._config_lock = asyncio.Lock()
            async with self._config_lock:
                if self._agent_urls is None:
                    self._agent_urls = await self._load_agents()
        url = self._agent_urls.get(agent)
        if url is None:
            known = ", ".join(sorted(self._agent_urls)) or "(none)"
            raise GymRequestError(
                "head", self.head_url, None, f"no agent named {agent!r}; known agents: {known}"
            )
        return url.rstrip("/")

    async def _load_agents(self) -> dict[str, str]:
        url = self.head_url + "/global_config_dict_yaml"
        text = await self._get_text("head", url)
        try:
            config = yaml.safe_load(json.loads(text))
        except (ValueError, yaml.YAMLError) as error:
            raise GymRequestError(
                "head", url, 200, f"config is not a JSON string of YAML: {error}"
            ) from error
        if not isinstance(config, dict):
            raise GymRequestError("head", url, 200, f"config is not a mapping: {text[:200]!r}")
        agents = {}
        for name, entry in config.items():
            if isinstance(entry, dict) and isinstance(entry.get("responses_api_agents"), dict):
                for settings in entry["responses_api_agents"].values():
                    agents[str(name)] = f"http://{settings['host']}:{settings['port']}"
        return agents

    async def _get_text(self, server: str, url: str) -> str:
        try:
            async with self._client().get(url) as response:
                text = await response.text()
                if response.status >= 300:
                    raise GymRequestError(server, url, response.status, text[:_BODY_CHARS])
                return text
        except aiohttp.ClientError as error:
            raise GymRequestError(server, url, None, f"{type(error).__name__}: {error}") from error

    async def _post_run(self, server: str, url: str, row: dict[str, Any], data: dict[str, Any]) -> Any:
        """POST like ``nemo_gym.server_utils.request(..., _internal=True)`` at 0.4.0: until the
        answer's head arrives, every exception is retried after ``RETRY_SLEEP_S``, with no limit
        (upstream counts tries only for non-internal calls); then the body is read once."""
        payload = json.dumps(row)  # serialised once, outside the loop, as upstream does with orjson
        attempt = 0
        while True:
            try:
                response = await self._client().post(
                    url, data=payload, headers={"Content-Type": "application/json"}
                )
                break
            except Exception as error:  # upstream retries every exception here
                attempt += 1
                self._record(
                    "info",
                    {**data, "attempt": attempt, "error": f"{type(error).__name__}: {error}"},
                    "run_retry",
                )
                await asyncio.sleep(RETRY_SLEEP_S)
        async with response:
            try:
                text = await response.text()
            except aiohttp.ClientError as error:
                raise GymRequestError(
                    server, url, None, f"answer cut off: {type(error).__name__}: {error}"
                ) from error
            return decode_json(server, url, response.status, text)

    async def close(self) -> None:
        """Cancel requests nobody awaits any more and close the HTTP session, for good."""
        self._closed = True
        pending = list(self._tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        await super().close()


def _agent_name(row: Mapping[str, Any], position: int) -> str:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"row {position} (_rowidx={row.get('_rowidx')!r}) has no agent_ref.name; "
            "NeMo Gym rows name their agent as {'agent_ref': {'name': '<agent instance>'}}"
        )
    return name


async def post_json(
    session: aiohttp.ClientSession,
    server: str,
    url: str,
    body: Any,
    *,
    timeout_s: float,
    object_only: bool = False,
) -> Any:
    """POST ``body`` and decode the JSON answer (a JSON object when ``object_only``); every failure
    is a ``GymRequestError`` naming ``server`` (``timeout_s``: the session's deadline, for the message)."""
    try:
        async with session.post(url, json=body) as response:
            text = await response.text()
            status = response.status
    except TimeoutError as error:
        raise GymRequestError(server, url, None, f"no answer within {timeout_s} s") from error
    except aiohttp.ClientError as error:
        raise GymRequestError(server, url, None, f"{type(error).__name__}: {error}") from error
    return decode_json(server, url, status, text, object_only=object_only)


def decode_json(server: str, url: str, status: int, text: str, *, object_only: bool = False) -> Any:
    """An answer as upstream's ``raise_for_status`` + ``get_response_json`` read it: a status of
    300 or more, or a body that is not JSON, is a ``GymRequestError`` naming ``server``."""
    if status >= 300:
        raise GymRequestError(server, url, status, _error_text(text))
    try:
        decoded = json.loads(text)
    except ValueError as error:
        raise GymRequestError(
            server, url, status, f"malformed JSON body ({error}): {text[:200]!r}"
        ) from error
    if object_only and not isinstance(decoded, dict):
        raise GymRequestError(server, url, status, f"expected a JSON object, got {text[:200]!r}")
    return decoded


def _error_text(text: str) -> str:
    """NeMo Gym error bodies are JSON strings; show the string itself."""
    with contextlib.suppress(ValueError):
        decoded = json.loads(text)
        if isinstance(decoded, str):
            return decoded[:_BODY_CHARS]
    return text[:_BODY_CHARS]


def _retrieve_exception(task: asyncio.Task[Result]) -> None:
    """Mark a failure as seen, so an awaitable nobody awaits (short results) stays quiet."""
    if not task.cancelled():
        task.exception()
