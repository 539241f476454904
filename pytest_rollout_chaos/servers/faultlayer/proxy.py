"""One link's HTTP reverse proxy: record the request, apply the rules it hits, forward, rewrite.

Every request that reaches a link's port is recorded as a Jepsen operation under the upstream
server's source (``invoke`` on arrival, ``ok``/``fail`` with status and latency when the answer
leaves, ``info`` when the connection was cut), with the row when the layer can tell it
(``rows.RowIndex``). An ``ok`` whose answer, as it leaves, carries generated token ids (a
``/run`` result, a ``/v1/responses`` or chat/completions answer) lists one ``fingerprint`` per
model call under ``generations`` and one ``logprob_digest`` under ``logprobs``, and a ``/run``
result its ``reward`` (and under ``drifted`` the model calls whose prompt ids do not extend the
previous call's): the servers' side of what a collector may hand back as turns, at a fixed
~25 bytes per generation and one pass over a body already decoded. Then, in this
order, the effects of the rules it hits:

- ``delay`` and ``hang`` hold the request before it is forwarded;
- ``http_error`` and ``trajectory_exception`` answer in the server's place (it never sees it);
- ``nan_logprobs``, ``prefix_drift`` and ``malformed_json`` rewrite the server's answer.

Forwarding is faithful where it matters to a client: the method, path, query, headers
(hop-by-hop ones excepted), body and cookies go through untouched, each request on a fresh
upstream connection (no pooled connection outlives a server restart), with no deadline of the
layer's own. When the upstream refuses or drops the connection, the client's connection is
dropped too, never turned into a 502, and when the client goes away the upstream request is
cancelled: the layer is as invisible as a TCP proxy until a rule fires.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from pytest_rollout_chaos.history import EventKind, fingerprint, logprob_digest
from pytest_rollout_chaos.servers.faultlayer import rewrite
from pytest_rollout_chaos.servers.faultlayer.rows import SESSION_HEADER
from pytest_rollout_chaos.servers.faultlayer.rules import Rule
from pytest_rollout_chaos.servers.faultlayer.state import LayerState, Link

REQUEST_ID_HEADER: Final = "X-Request-Id"
VLLM_500_TEXT: Final = "Internal Server Error"
# RFC 9110 7.6.1 hop-by-hop fields, plus the framing fields aiohttp sets itself
_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "host",
    }
)
_PRE_EFFECTS: Final = ("delay", "hang")
_TERMINAL_EFFECTS: Final = ("http_error", "trajectory_exception")
_REWRITE_EFFECTS: Final = ("nan_logprobs", "prefix_drift", "malformed_json")

# Recorded for a request whose client went away first: the client's doing, not the server's.
CLIENT_CLOSED: Final = "the client closed the connection"

_counter = itertools.count(1)


@dataclass(slots=True)
class _Answer:
    """The upstream's answer as it will leave: status, headers, body, and the body decoded."""

    status: int
    headers: CIMultiDictProxy[str]
    raw: bytes
    document: Any


@dataclass(frozen=True, slots=True)
class _Hit:
    """Where a rule fired: the link, the request's path and its row (for recording the hit)."""

    state: LayerState
    link: Link
    path: str
    row: int | None

    def record(self, rule: Rule, **extra: Any) -> None:
        self.state.record_hit(self.link, rule, self.row, self.path, **extra)


class ConnectionCut(Exception):
    """The upstream refused or dropped the connection; the client's connection is dropped too."""


def link_app(state: LayerState, link: Link, session: aiohttp.ClientSession) -> web.Application:
    """The app serving one link's port: every method and path is forwarded."""
    app = web.Application(client_max_size=1 << 30)

    async def handle(request: web.Request) -> web.StreamResponse:
        return await forward(state, link, session, request)

    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def upstream_session() -> aiohttp.ClientSession:
    """A client that keeps no connections, no cookies and no deadline of its own."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True, limit=0),
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(total=None),
    )


async def forward(
    state: LayerState, link: Link, session: aiohttp.ClientSession, request: web.Request
) -> web.StreamResponse:
    """Record, apply the rules, forward (unless a rule answers), rewrite, record the answer."""
    body = await request.read()
    document = _json_document(body, request.content_type)
    row = state.rows.row_of(
        document,
        request.headers.get("Cookie"),
        stream=f"{link.name} {request.path}",
        session=request.headers.get(SESSION_HEADER),
    )
    request_id = request.headers.get(REQUEST_ID_HEADER) or f"{link.source}-{os.getpid()}-{next(_counter)}"
    writer = state.writer(link.source)
    op = f"{request.method} {request.path}"
    facts: dict[str, Any] = {"link": link.name, "server": link.server}
    if row is not None:
        facts["row"] = row
    started = time.monotonic()
    writer.emit("invoke", op, facts, request_id=request_id)

    def finish(kind: EventKind, **outcome: Any) -> None:
        latency_ms = round((time.monotonic() - started) * 1000, 2)
        writer.emit(kind, op, {**facts, **outcome, "latency_ms": latency_ms}, request_id=request_id)

    try:
        fired = state.firing(link.server, request.path, row) if state.rules else []
        hit = _Hit(state, link, request.path, row)
        for rule in fired:
            if rule.effect in _PRE_EFFECTS:
                await _hold(hit, rule, document)
        for rule in fired:
            if rule.effect in _TERMINAL_EFFECTS:
                instead = _answer_instead(hit, rule)
                finish("fail", status=instead.status, effect=rule.effect)
                return instead
        status, headers, raw = await _send_upstream(session, link, request, body)
        answer = _Answer(status, headers, raw, _json_document(raw, headers.get("Content-Type", "")))
        for rule in fired:
            if rule.effect in _REWRITE_EFFECTS:
                _rewrite(hit, rule, answer)
        if answer.document is not None:
            state.observe_generations(link.server, request.path, answer.document)
        if row is not None and answer.status < 400:
            state.rows.learn_answer(row, answer.document, headers.getall("Set-Cookie", []))
    except ConnectionCut as cut:
        finish("info", error=str(cut))
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError from None
    except asyncio.CancelledError:
        finish("info", error=CLIENT_CLOSED)
        raise
    if answer.status >= 400:
        finish("fail", status=answer.status)
    else:
        finish("ok", status=answer.status, **_generated(answer.document))
    return web.Response(status=answer.status, headers=_outgoing(answer.headers), body=answer.raw)


async def _send_upstream(
    session: aiohttp.ClientSession, link: Link, request: web.Request, body: bytes
) -> tuple[int, CIMultiDictProxy[str], bytes]:
    url = f"{link.upstream}{request.path_qs}"
    try:
        async with session.request(
            request.method,
            url,
            headers=_outgoing(request.headers),
            data=body if body else None,
            allow_redirects=False,
        ) as response:
            return response.status, response.headers, await response.read()
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as error:
        raise ConnectionCut(f"{link.server} at {link.upstream}: {type(error).__name__}: {error}") from None


def _generated(document: Any) -> dict[str, Any]:
    """What an answer generated, as recorded: fingerprints, logprob digests and, for a ``/run``, its
    reward and which model calls' prompt ids drifted."""
    calls = rewrite.answer_calls(document)
    facts: dict[str, Any] = {}
    if calls:
        facts["generations"] = [fingerprint(ids) for ids, _ in calls]
        facts["logprobs"] = [logprob_digest(values) for _, values in calls]
    reward = rewrite.answer_reward(document)
    if reward is not None:
        facts["reward"] = reward
        drifted = rewrite.answer_drift(document)
        if drifted:
            facts["drifted"] = drifted
    return facts


def _outgoing(headers: Mapping[str, str]) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        if name.lower() not in _HOP_BY_HOP:
            out.add(name, value)
    return out


def _json_document(body: bytes, content_type: str) -> Any:
    if not body or "json" not in content_type:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


async def _hold(hit: _Hit, rule: Rule, document: Any) -> None:
    if rule.effect == "delay":
        items = rewrite.batch_size(document)
        delay_s = (rule.params["delay_ms"] + rule.params["per_item_ms"] * items) / 1000
        hit.record(rule, delay_s=round(delay_s, 4), items=items)
        await asyncio.sleep(delay_s)
        return
    hit.record(rule)
    released = hit.state.release_event(rule.id)
    if rule.id not in hit.state.rules:  # disarmed while we were getting here
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(released.wait(), timeout=rule.params["max_hang_s"])


def _answer_instead(hit: _Hit, rule: Rule) -> web.Response:
    hit.record(rule)
    if rule.effect == "trajectory_exception":
        error = RuntimeError(rule.params["message"])
        # NeMo Gym's exception middleware answers 500 with the repr as a JSON string
        return web.json_response(repr(error), status=500)
    body = rule.params["body"]
    if body is None:
        body = {"error": {"message": "injected HTTP error", "type": "chaos", "code": rule.params["status"]}}
    if isinstance(body, str):
        return web.Response(status=rule.params["status"], text=body)
    return web.json_response(body, status=rule.params["status"])


def _rewrite(hit: _Hit, rule: Rule, answer: _Answer) -> None:
    """Apply one rewriting rule to the answer, in place."""
    if rule.effect == "nan_logprobs" and rule.params["shape"] == "http_500":
        hit.record(rule, shape="http_500")
        # vLLM fails to encode a NaN logprob and Starlette answers a plain-text 500
        answer.status, answer.raw, answer.document = 500, VLLM_500_TEXT.encode(), None
        return
    if answer.headers.get("Content-Encoding", "identity") != "identity":
        hit.record(rule, skipped="encoded response body", changed=0)
        return
    if rule.effect == "malformed_json":
        hit.record(rule, style=rule.params["style"])
        answer.raw, answer.document = rewrite.malform(answer.raw, rule.params["style"]), None
        return
    if answer.document is None:
        hit.record(rule, skipped="response is not JSON", changed=0)
        return
    if rule.effect == "nan_logprobs":
        changed = rewrite.rewrite_logprobs(answer.document, rule.params["shape"], rule.params["token_index"])
        hit.record(rule, shape=rule.params["shape"], changed=changed)
    else:
        memory = hit.state.seen_generations.get(rule.id, [])
        changed = rewrite.drift_prompt_ids(
            answer.document, memory, rule.params["mode"], rule.params["replacement_token_id"]
        )
        hit.record(rule, mode=rule.params["mode"], changed=changed)
    answer.raw = rewrite.dumps(answer.document)
