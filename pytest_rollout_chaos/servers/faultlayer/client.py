"""Clients of the fault layer's control API: async ``LayerControl`` for faults, sync calls for fixtures.

Every call has a timeout: a fault that cannot be armed or disarmed must fail loudly, never hang
the test. Errors come back as ``FaultError`` naming the layer URL, the call and the layer's own
message (which lists the valid choices).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.http_client import SessionOwner


class LayerControl(SessionOwner):
    """Arm, list and disarm fault rules; register rows; reset."""

    def __init__(self, base_url: str, *, timeout_s: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    async def arm(
        self,
        server: str,
        effect: str,
        *,
        match: Mapping[str, Any] | None = None,
        tag: str | None = None,
        seed: int | None = None,
        **params: Any,
    ) -> str:
        """Arm a rule on requests to ``server``; return its id. ``match``: route, row, nth, every,
        probability, count."""
        body: dict[str, Any] = {"server": server, "effect": effect, "match": dict(match or {}), **params}
        if tag is not None:
            body["tag"] = tag
        if seed is not None:
            body["seed"] = seed
        answer = await self._call("POST", "/rules", body, expect=(201,))
        return str(answer["id"])

    async def disarm(self, rule_id: str) -> bool:
        """Disarm one rule; False when it was not armed (so healing twice is fine)."""
        answer = await self._call("DELETE", f"/rules/{rule_id}", None, expect=(200, 404))
        return "disarmed" in answer

    async def clear(self, *, tag: str | None = None) -> list[str]:
        """Disarm every rule, or every rule with ``tag``; return the ids disarmed."""
        path = "/rules" if tag is None else f"/rules?tag={tag}"
        answer = await self._call("DELETE", path, None, expect=(200,))
        return [str(rule_id) for rule_id in answer["disarmed"]]

    async def rules(self) -> list[dict[str, Any]]:
        """The armed rules with their candidate and hit counts."""
        answer = await self._call("GET", "/rules", None, expect=(200,))
        return list(answer["rules"])

    async def register_rows(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Tell the layer the rows of this collection, so requests can be tied to them by prompt."""
        answer = await self._call("POST", "/rows", {"rows": list(rows)}, expect=(200,))
        return int(answer["registered"])

    async def _call(
        self, method: str, path: str, body: Mapping[str, Any] | None, *, expect: tuple[int, ...]
    ) -> dict[str, Any]:
        session = self._http(aiohttp.ClientTimeout(total=self.timeout_s))
        where = f"{method} {self.base_url}{path}"
        try:
            async with session.request(method, f"{self.base_url}{path}", json=body) as response:
                text = await response.text()
                if response.status not in expect:
                    raise FaultError(f"fault layer call {where} answered {response.status}: {_message(text)}")
                try:
                    answer = await response.json(content_type=None)
                except ValueError:
                    raise FaultError(f"fault layer call {where} answered non-JSON: {text[:500]}") from None
        except (TimeoutError, aiohttp.ClientError) as error:
            raise FaultError(
                f"fault layer call {where} failed: {type(error).__name__}: {error or 'timed out'}"
                f" (limit {self.timeout_s:.1f}s); is the fault layer running?"
            ) from error
        return answer if isinstance(answer, dict) else {"value": answer}


def add_link(
    base_url: str, *, name: str, server: str, source: str, upstream: str, timeout_s: float = 5.0
) -> str:
    """Open a link listener that forwards to ``upstream``; return its ``host:port`` (synchronous)."""
    answer = call_sync(
        base_url,
        "POST",
        "/links",
        {"name": name, "server": server, "source": source, "upstream": upstream},
        timeout_s=timeout_s,
    )
    return str(answer["listen"])


def reset(base_url: str, *, timeout_s: float = 5.0) -> None:
    """Disarm every rule and forget every row (synchronous, for fixtures)."""
    call_sync(base_url, "POST", "/reset", {}, timeout_s=timeout_s)


def call_sync(
    base_url: str, method: str, path: str, body: Mapping[str, Any] | None, *, timeout_s: float
) -> dict[str, Any]:
    """One control call with a deadline; ``FaultError`` with the layer's message on any failure."""
    url = base_url.rstrip("/") + path
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as error:
        text = error.read().decode(errors="replace")
        raise FaultError(f"fault layer call {method} {url} answered {error.code}: {_message(text)}") from None
    except (OSError, ValueError) as error:
        raise FaultError(
            f"fault layer call {method} {url} failed: {error}; is the fault layer running?"
        ) from None
    return answer if isinstance(answer, dict) else {"value": answer}


def _message(text: str) -> str:
    try:
        answer = json.loads(text)
    except ValueError:
        return text[:500]
    return str(answer.get("error", text))[:500] if isinstance(answer, dict) else text[:500]
