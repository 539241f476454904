"""One link's HTTP reverse proxy: record the request, apply the rules it hits, forward, rewrite.

Every request that reaches a link's port is recorded as a Jepsen operation under the upstream
server's source (``invoke`` on arrival, ``ok``/``fail`` with status and latency when the answer
leaves, ``info`` when the connection was cut), with the row when the layer can tell it
(``rows.RowIndex``). A chat request's ``invoke`` holds a ``text_fingerprint`` of its last
message (``last_message``: the prompt, or the environment's observation). An ``ok`` whose answer,
as it leaves, carries generated token ids (a ``/run`` result, a ``/v1/responses`` or
chat/completions answer) lists one ``fingerprint`` per model call under ``generations`` and one
``logprob_digest`` under ``logprobs`` (a policy's answer each one's ``finish_reason`` under
``finishes`` and a chat answer each choice's text, fingerprinted, under ``texts``), and a ``/run``
result its ``reward``, a ``fingerprint`` of the prompt ids each model call was sent under
``prompts`` (and under ``drifted`` the model calls whose prompt ids do not extend the previous
call's, with every call's prompt ids in full under ``prompt_ids``, so a judge can rebuild the
splice a collector owes): the servers' side of what a collector may hand back as turns, at a
fixed ~25 bytes per model call unless a prompt drifted, and one pass over a body already
decoded; a ``fail`` holds the start of the error answer's body (``body``), what a client may
name as its cause. The ``invoke`` of a collector's ``/run`` or model call for a known row holds
what it asks for (``asked``: its sampling parameters, a digest of its prompt), so a retry can be
held against the attempt it replaces. Then, in this order, the effects of the rules it hits
(each effect's phase is declared in ``effects``, what it does in ``hits``):

- ``delay`` and ``hang`` hold the request before it is forwarded;
- ``http_error`` and ``trajectory_exception`` answer in the server's place (it never sees it);
- ``nan_logprobs``, ``logprob_drift``, ``prefix_drift`` and ``malformed_json`` rewrite the server's answer.

Forwarding is faithful where it matters to a client: the method, raw target, headers (hop-by-hop
ones excepted), body and cookies go through untouched, with no header added and no deadline of
the layer's own. A link's port speaks HTTP/1.1 through ``downstream`` and ``upstream``, the
least a reverse proxy needs (a general web framework and client cost the layer most of its
time). Each link keeps its own pool of keep-alive upstream connections
(``upstream.UpstreamPool``: a new connection per request cost more still), and a connection
carries one request at a time, so a fault that cuts a connection cuts exactly the request on
it. An answer no rule rewrites is streamed to the client as it arrives (a server-sent event
stream stays a stream); it is recorded, and the events flushed, before its last piece leaves,
so whoever got an answer can read its record. When the upstream refuses or drops the
connection, the client's connection is dropped too, never turned into a 502, and when the
client goes away the upstream request is cancelled and its connection closed: the layer is as
invisible as a TCP proxy until a rule fires.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Mapping
from typing import Any, Final

from pytest_rollout_chaos import json_decode
from pytest_rollout_chaos.history import EventKind, fingerprint, logprob_digest, text_fingerprint
from pytest_rollout_chaos.servers.faultlayer import answers, asked, effects, hits
from pytest_rollout_chaos.servers.faultlayer.downstream import ClientConnection, Reply, Request
from pytest_rollout_chaos.servers.faultlayer.hits import Hit, OutgoingAnswer
from pytest_rollout_chaos.servers.faultlayer.state import Decisions, Link
from pytest_rollout_chaos.servers.faultlayer.upstream import Answer, UpstreamError, UpstreamPool

REQUEST_ID_HEADER: Final = "X-Request-Id"
COLLECTOR_LINK_PREFIX: Final = "collector->"  # the links whose clients are the collector under test
ASKING_PATHS: Final = frozenset({"/run", "/v1/chat/completions", "/v1/completions", "/inference/v1/generate"})
# RFC 9110 7.6.1 hop-by-hop fields, plus the framing fields each side sets itself
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
KEEPALIVE_S: Final = 2.0  # idle upstream connections kept this long
BODY_EXCERPT_BYTES: Final = 300  # of an error answer's body, recorded with its status
_PRE_EFFECTS: Final = effects.in_phase("hold")
_TERMINAL_EFFECTS: Final = effects.in_phase("answer")
_REWRITE_EFFECTS: Final = effects.in_phase("rewrite")

# Recorded for a request whose client went away first: the client's doing, not the server's.
CLIENT_CLOSED: Final = "the client closed the connection"

_counter = itertools.count(1)


class LinkPort:
    """What serves one link's port: each client connection's requests go through the link's pool.

    The pool keeps idle connections for ``KEEPALIVE_S``, well before the servers behind the
    layer drop them (uvicorn, under vLLM and NeMo Gym, after 5 s; aiohttp after 75 s), so the
    layer never sends a request on a connection the server is closing. It has no limit on
    connections in flight: the layer must never queue what a client sent at once, so the pool
    grows to the workload's concurrency and keeps that many idle for the next burst.
    """

    def __init__(self, state: Decisions, link: Link) -> None:
        self.state, self.link = state, link
        self.pool = UpstreamPool(link.upstream, keepalive_s=KEEPALIVE_S)
        self.connections: set[ClientConnection] = set()

    def protocol(self) -> ClientConnection:
        """A new client connection (the factory ``loop.create_server`` calls)."""
        return ClientConnection(self._handle, self.connections)

    async def close(self) -> None:
        """Cut every client connection and close the upstream pool."""
        for connection in list(self.connections):
            connection.abort()
        await self.pool.close()

    async def _handle(self, request: Request, reply: Reply) -> None:
        await forward(self.state, self.link, self.pool, request, reply)


async def forward(state: Decisions, link: Link, pool: UpstreamPool, request: Request, reply: Reply) -> None:
    """Record, apply the rules, forward (unless a rule answers), rewrite or stream, record the answer."""
    body = request.body
    document = _json_document(body, request.content_type)
    row, fired = await state.arrive(link, request, document)
    asks = _asks(link, request.path, row, document)
    record = _Record(state, link, request, row=row, asks=asks, document=document)
    try:
        hit = Hit(state, link, request.path, row)
        for rule in fired:
            if rule.effect in _PRE_EFFECTS:
                await hits.hold(hit, rule, document)
        for rule in fired:
            if rule.effect in _TERMINAL_EFFECTS:
                status, content_type, instead = hits.answer_instead(hit, rule)
                record.finish("fail", status=status, effect=rule.effect, body=_excerpt(instead))
                await reply.send(status, [("Content-Type", content_type)], instead)
                return
        rewriting = [rule for rule in fired if rule.effect in _REWRITE_EFFECTS]
        headers = _outgoing(request.headers)
        async with pool.exchange(request.method, request.target, headers, body) as upstream:
            if not rewriting:
                await _stream(record, reply, upstream)
                return
            answer = _answer(upstream, await upstream.read())
        for rule in rewriting:
            memory = await state.memory(rule.id) if rule.effect == "prefix_drift" else []
            hits.rewrite_answer(hit, rule, answer, memory)
        if answer.cut_at is not None:
            await _cut_off(record, reply, answer)
            return
        await record.answered(answer)
        await reply.send(answer.status, _outgoing(answer.headers), answer.raw)
    except UpstreamError as cut:
        record.finish("info", error=f"{link.server} at {link.upstream}: {cut}")
        reply.abort()
    except (asyncio.CancelledError, ConnectionResetError):
        record.finish("info", error=CLIENT_CLOSED)
        raise asyncio.CancelledError from None


class _Record:
    """One request's record: ``invoke`` now, one outcome later (only the first counts)."""

    def __init__(
        self,
        state: Decisions,
        link: Link,
        request: Request,
        *,
        row: int | None,
        asks: Mapping[str, Any],
        document: Any = None,
    ) -> None:
        self.state, self.link, self.row, self.path = state, link, row, request.path
        self.op = f"{request.method} {request.path}"
        own_id = request.headers.get(REQUEST_ID_HEADER)
        self.request_id = own_id or f"{link.source}-{os.getpid()}-{next(_counter)}"
        self.facts: dict[str, Any] = {"link": link.name, "server": link.server}
        if row is not None:
            self.facts["row"] = row
        invoke = {**self.facts, **asks}
        chat, last = answers.last_message(document)
        if chat:  # what the policy is asked to answer: the prompt, or the environment's observation
            invoke["last_message"] = text_fingerprint(last)
        self.writer = state.writer(link.source)
        self.started = time.monotonic()
        self.done = False
        self.writer.emit("invoke", self.op, invoke, request_id=self.request_id)

    def finish(self, kind: EventKind, **outcome: Any) -> None:
        """Record the outcome and write it out: the client may see the answer next."""
        if self.done:
            return
        self.done = True
        latency_ms = round((time.monotonic() - self.started) * 1000, 2)
        data = {**self.facts, **outcome, "latency_ms": latency_ms}
        self.writer.emit(kind, self.op, data, request_id=self.request_id)
        self.writer.flush()

    async def answered(self, answer: OutgoingAnswer) -> None:
        """What the layer learns from an answer as it leaves, then its outcome."""
        cookies = answer.headers.getall("Set-Cookie", [])
        await self.state.answered(
            self.link,
            self.path,
            row=self.row,
            status=answer.status,
            document=answer.document,
            set_cookies=cookies,
        )
        if answer.status >= 400:
            self.finish("fail", status=answer.status, body=_excerpt(answer.raw))
        else:
            self.finish("ok", status=answer.status, **_generated(answer.document))


def _asks(link: Link, path: str, row: int | None, document: Any) -> dict[str, Any]:
    """What a collector's ``/run`` or model call for a known row asks for (``asked``), recorded
    with its ``invoke`` only: a judge holds a retry against the attempt it replaces."""
    if row is None or path not in ASKING_PATHS or not link.name.startswith(COLLECTOR_LINK_PREFIX):
        return {}
    return asked.asked(document)


async def _cut_off(record: _Record, reply: Reply, answer: OutgoingAnswer) -> None:
    """Send the head with the whole body's length and part of the body, then close: the client
    gets a status and a body that ends early, no answer it can read (recorded so)."""
    cut, whole = answer.cut_at or 0, len(answer.raw)
    record.finish("info", error=f"answer cut off by the fault layer after {cut} of {whole} bytes")
    await reply.start(answer.status, _outgoing(answer.headers), whole)
    await reply.write(answer.raw[:cut])
    reply.abort()


def _answer(upstream: Answer, raw: bytes) -> OutgoingAnswer:
    return OutgoingAnswer(upstream.status, upstream.headers, raw, _json_document(raw, upstream.content_type))


async def _stream(record: _Record, reply: Reply, upstream: Answer) -> None:
    """Pass the answer on as it arrives. One that came whole is recorded before any byte leaves;
    a JSON answer in pieces before its last piece leaves (the record reads the whole document,
    so each piece leaves when the next arrives); anything else piece by piece as it comes (a
    server-sent event stream), recorded before its end leaves."""
    first = await upstream.chunk()
    headers = _outgoing(upstream.headers)
    if upstream.at_eof():  # the usual answer: sent in one piece with its length, as it came
        await record.answered(_answer(upstream, first))
        await reply.send(upstream.status, headers, first)
        return
    await reply.start(upstream.status, headers, upstream.content_length)
    # ConnectionResetError from a write, here and below: the client went away
    if "json" in upstream.content_type:
        pieces = [first]
        while chunk := await upstream.chunk():
            await reply.write(pieces[-1])
            pieces.append(chunk)
        await record.answered(_answer(upstream, b"".join(pieces)))
        await reply.end(pieces[-1])
        return
    chunk = first
    while chunk:
        await reply.write(chunk)
        chunk = await upstream.chunk()
    await record.answered(_answer(upstream, b""))
    await reply.end()


def _generated(document: Any) -> dict[str, Any]:
    """What an answer generated, as recorded: fingerprints, logprob digests, for a policy's answer
    why each generation stopped (``finishes``) and, for a ``/run``, its reward, what each model
    call was sent (``prompts``) and which model calls' prompt ids drifted (with every call's
    prompt ids, ``prompt_ids``: only then does a judge need them whole)."""
    calls, finishes = answers.answer_generated(document)
    facts: dict[str, Any] = {}
    if calls:
        facts["generations"] = [fingerprint(ids) for ids, _ in calls]
        facts["logprobs"] = [logprob_digest(values) for _, values in calls]
        if finishes:
            facts["finishes"] = finishes
        texts = answers.answer_texts(document)
        if texts:
            facts["texts"] = [text_fingerprint(text) for text in texts]
    reward = answers.answer_reward(document)
    if reward is not None:
        facts["reward"] = reward
        prompts = answers.answer_prompts(document)
        if prompts and len(prompts) == len(calls):
            facts["prompts"] = [fingerprint(ids) for ids in prompts]
        drifted = answers.answer_drift(document)
        if drifted:
            facts["drifted"] = drifted
            if "prompts" in facts:
                facts["prompt_ids"] = prompts
    return facts


def _excerpt(body: object) -> str:
    """The start of an error answer's body, as recorded (what a client could name as its cause)."""
    raw = body if isinstance(body, bytes) else b""
    return raw[:BODY_EXCERPT_BYTES].decode("utf-8", "replace")


def _outgoing(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers.items() if name.lower() not in _HOP_BY_HOP]


def _json_document(body: bytes, content_type: str) -> Any:
    if not body or "json" not in content_type:
        return None
    try:
        return json_decode.loads(body)
    except ValueError:
        return None
