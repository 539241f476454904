"""A policy server this run did not start (``--rollout-chaos-policy-url``): wait for it, pick its model.

Nothing here starts, signals or stops anything. ``connect`` polls the server within one
monotonic deadline (``servers.readiness.wait_until``): ``GET /health`` must answer 200, as vLLM
and SGLang do once their engine is up (503 while it loads); a server with no ``/health`` route
(404 or 405) is judged by ``GET /v1/models`` alone. Either way ``/v1/models`` must then list a
model. Refused connections and error statuses are retried until the deadline, so a server
started just before pytest has time to bind its port and load; after it, ``ExternalPolicyError``
says what was tried, what came back last and what to pass.

The served model name requests use comes from ``/v1/models``: the listed id that names the
``--rollout-chaos-model`` directory (its path, as ``vllm serve /path/to/model`` lists it, or its
directory name), else the first id listed.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.errors import ChaosError
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.policy.spec import PolicyServer

REQUEST_TIMEOUT_S: Final = 5.0
POLL_INTERVAL_S: Final = 0.25
_NO_ROUTE: Final = (404, 405)
_BODY_CHARS: Final = 200
NEXT_STEP: Final = (
    "start the server first and pass the URL it listens on (such as "
    "--rollout-chaos-policy-url=http://127.0.0.1:8000/v1); a server that needs longer to load "
    "can be given more time with -o rollout_chaos_policy_ready_timeout_s=SECONDS"
)


class ExternalPolicyError(ChaosError):
    """The external policy server did not answer ready before the deadline."""


@dataclass(slots=True)
class _Attempts:
    """What the polls saw, for the message when the deadline passes."""

    url: str
    deadline: float
    clock: Callable[[], float]
    tries: int = 0
    answered: bool = False  # any HTTP answer at all, not just refused or timed-out connections
    health_route: bool = True
    last: str = "nothing yet"
    models: list[str] = field(default_factory=list)

    def probe(self) -> bool:
        """One poll; True once the server is ready and lists a model."""
        self.tries += 1
        if self.health_route:
            answer = self._get("/health")
            if answer is None:
                return False
            status, text = answer
            if status in _NO_ROUTE:
                self.health_route = False  # some OpenAI-compatible servers have none
            elif status != 200:
                self.last = f"GET /health answered {status}{_excerpt(text)}"
                return False
        answer = self._get("/v1/models")
        if answer is None:
            return False
        status, text = answer
        if status != 200:
            self.last = f"GET /v1/models answered {status}{_excerpt(text)}"
            return False
        try:
            self.models = model_ids(json.loads(text))
        except (ValueError, TypeError) as error:
            self.last = f"GET /v1/models answered 200 without a model list: {error}"
            return False
        if not self.models:
            self.last = "GET /v1/models answered 200 but listed no model"
            return False
        return True

    def _get(self, path: str) -> tuple[int, str] | None:
        """Status and body, or None (recorded in ``last``) when no HTTP answer came."""
        request = urllib.request.Request(self.url + path, headers={"Accept": "application/json"})
        timeout_s = max(0.1, min(REQUEST_TIMEOUT_S, self.deadline - self.clock()))
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                status, raw = int(response.status), response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        except (OSError, http.client.HTTPException) as error:
            # refused, reset, timed out, TLS trouble, or something that does not speak HTTP
            reason = error.reason if isinstance(error, urllib.error.URLError) else error
            detail = (
                f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)
            )
            self.last = f"GET {path}: {detail}"
            return None
        self.answered = True
        return status, raw.decode(errors="replace").strip()


def _excerpt(text: str) -> str:
    return f": {text[:_BODY_CHARS]!r}" if text else ""


def model_ids(document: object) -> list[str]:
    """The ids of an OpenAI ``/v1/models`` answer, in order; ``TypeError`` if it is not one."""
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, list):
        raise TypeError(f"expected {{'data': [{{'id': ...}}, ...]}}, got {str(document)[:_BODY_CHARS]!r}")
    return [str(card["id"]) for card in data if isinstance(card, dict) and card.get("id")]


def served_model(ids: Sequence[str], model_dir: Path) -> str:
    """The listed id naming ``model_dir`` (its path or its directory name), else the first one."""
    for model_id in ids:
        if model_id == str(model_dir) or Path(model_id).name == model_dir.name:
            return model_id
    return ids[0]


def connect(
    url: str,
    *,
    model_dir: Path,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> PolicyServer:
    """The server at ``url`` once ready (within ``timeout_s``), as a ``PolicyServer`` without a process."""
    root = url.rstrip("/").removesuffix("/v1")
    attempts = _Attempts(root, deadline=clock() + timeout_s, clock=clock)
    try:
        readiness.wait_until(
            attempts.probe,
            timeout_s=timeout_s,
            exit_code=lambda: None,  # not ours: it cannot be watched for an exit
            clock=clock,
            sleep=sleep,
            interval_s=POLL_INTERVAL_S,
        )
    except readiness.NotReady as not_ready:
        raise ExternalPolicyError(_not_ready_text(attempts, not_ready.elapsed_s, timeout_s)) from None
    return PolicyServer.external(root, model=served_model(attempts.models, model_dir), model_dir=model_dir)


def _not_ready_text(attempts: _Attempts, elapsed_s: float, timeout_s: float) -> str:
    tried = (
        "GET /health, then GET /v1/models" if attempts.health_route else "GET /v1/models (no /health route)"
    )
    if not attempts.answered:
        what = f"nothing answered at {attempts.url} within {elapsed_s:.1f}s"
    else:
        what = f"the server at {attempts.url} was not ready within {elapsed_s:.1f}s"
    return (
        f"{what} (limit {timeout_s:g}s; tried {tried}, {attempts.tries} times; last: {attempts.last}); "
        f"{NEXT_STEP}"
    )
