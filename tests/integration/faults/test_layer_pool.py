"""The layer keeps upstream connections between requests, and every fault still hits exactly its
request: an upstream that drops one connection, a client that gives up, a restarted upstream,
the layer's own rules among concurrent requests, and Toxiproxy in front of the same link.

Each connection of a link's pool carries one request at a time, and one that a request left
half-read is closed, never handed to the next request: these tests would catch an answer meant
for one request reaching another, a cut spreading to its neighbours, or a stale connection
failing a request after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import aiohttp
import pytest
from aiohttp import web

from pytest_rollout_chaos.history import History, fingerprint
from pytest_rollout_chaos.servers.faultlayer import client as layer
from pytest_rollout_chaos.servers.faultlayer.client import LayerControl
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient
from pytest_rollout_chaos.servers.toxiproxy.spec import embedded_spec
from tests.faults._hooked import Hooked, hook_hits, wait_for
from tests.integration.faults._layer_rig import (
    WAIT_S,
    Layer,
    Upstream,
    client_session,
    link_to,
    serving,
    upstream_behind,
    within,
)

CONCURRENT: Final = 6


class Held:
    """An upstream route that holds each request until released, answering ``{"id": <its id>}``;
    it notes the connection each request came on and which handlers were cancelled."""

    def __init__(self) -> None:
        self.arrived: dict[str, asyncio.Event] = {}
        self.release = asyncio.Event()
        self.cancelled: set[str] = set()
        self.connections: set[tuple[str, int]] = set()
        self.drop: set[str] = set()  # ids whose connection the upstream drops instead of answering

    def arrival(self, request_id: str) -> asyncio.Event:
        return self.arrived.setdefault(request_id, asyncio.Event())

    async def handle(self, request: web.Request) -> web.StreamResponse:
        request_id = request.query["id"]
        assert request.transport is not None
        self.connections.add(request.transport.get_extra_info("peername"))
        await request.read()
        self.arrival(request_id).set()
        if request_id in self.drop:
            request.transport.abort()
            raise asyncio.CancelledError
        try:
            await asyncio.wait_for(self.release.wait(), timeout=WAIT_S)
        except asyncio.CancelledError:
            self.cancelled.add(request_id)
            raise
        return web.json_response({"id": request_id})


async def _ask(session: aiohttp.ClientSession, url: str, request_id: str) -> tuple[int, Any]:
    async with session.post(
        f"{url}/held?id={request_id}", json={}, headers={"X-Request-Id": request_id}
    ) as answer:
        return answer.status, await answer.json()


def _outcomes(history: History, server: str) -> dict[str, list[str]]:
    """Request id -> the kinds of the layer's outcome events for it (``ok``, ``fail``, ``info``)."""
    found: dict[str, list[str]] = {}
    for event in history.events(source=server):
        if event.op != "hook" and event.kind != "invoke" and event.request_id is not None:
            found.setdefault(event.request_id, []).append(event.kind)
    return found


def _settled(history: History, server: str, count: int) -> dict[str, list[str]]:
    wait_for(history, lambda _event: len(_outcomes(history, server)) >= count)
    return _outcomes(history, server)


# -- the pool ----------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_upstream_connections_are_kept_between_requests(fault_layer: Layer) -> None:
    held = Held()
    held.release.set()
    async with upstream_behind(fault_layer, {"/held": held.handle}) as upstream, client_session() as session:
        for index in range(10):
            assert await _ask(session, upstream.url, f"seq{index}") == (200, {"id": f"seq{index}"})
        assert len(held.connections) == 1, f"10 requests one after another came on {held.connections}"
        for burst in range(2):
            answers = await asyncio.gather(
                *(_ask(session, upstream.url, f"b{burst}-{index}") for index in range(CONCURRENT))
            )
            assert answers == [(200, {"id": f"b{burst}-{index}"}) for index in range(CONCURRENT)]
    assert len(held.connections) <= CONCURRENT, "the second burst reuses the first burst's connections"


@pytest.mark.asyncio
async def test_an_upstream_dropping_one_connection_cuts_only_that_request(fault_layer: Layer) -> None:
    held = Held()
    held.drop.add("victim")
    history = fault_layer.history()
    ids = ["victim", *(f"r{index}" for index in range(CONCURRENT - 1))]
    async with upstream_behind(fault_layer, {"/held": held.handle}) as upstream, client_session() as session:
        asks = {
            request_id: asyncio.ensure_future(_ask(session, upstream.url, request_id)) for request_id in ids
        }
        for request_id in ids:
            await within(held.arrival(request_id), f"request {request_id} reaches the upstream")
        held.release.set()
        await asyncio.wait(asks.values(), timeout=WAIT_S)
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            asks["victim"].result()
        for request_id in ids[1:]:
            assert asks[request_id].result() == (200, {"id": request_id})
        assert await _ask(session, upstream.url, "after") == (200, {"id": "after"})
    outcomes = _settled(history, upstream.server, len(ids) + 1)
    assert outcomes == {"victim": ["info"], **{request_id: ["ok"] for request_id in [*ids[1:], "after"]}}


@pytest.mark.asyncio
async def test_a_request_its_client_gave_up_on_never_answers_another(fault_layer: Layer) -> None:
    held = Held()
    history = fault_layer.history()
    async with upstream_behind(fault_layer, {"/held": held.handle}) as upstream, client_session() as session:
        abandoned = asyncio.ensure_future(_ask(session, upstream.url, "abandoned"))
        await within(held.arrival("abandoned"), "the request reaches the upstream")
        abandoned.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await abandoned
        for _ in range(int(WAIT_S / 0.02)):
            if "abandoned" in held.cancelled:
                break
            await asyncio.sleep(0.02)
        assert held.cancelled == {"abandoned"}, "the upstream request was cancelled with its client"
        held.release.set()
        answers = [await _ask(session, upstream.url, f"next{index}") for index in range(3)]
    assert answers == [(200, {"id": f"next{index}"}) for index in range(3)]
    outcomes = _settled(history, upstream.server, 4)
    assert outcomes["abandoned"] == ["info"]


@pytest.mark.asyncio
async def test_an_upstream_restarted_on_its_port_answers_the_next_request(fault_layer: Layer) -> None:
    held = Held()
    held.release.set()
    async with client_session() as session:
        async with serving({"/held": held.handle}) as port:
            upstream = link_to(fault_layer, port)
            assert await _ask(session, upstream.url, "before") == (200, {"id": "before"})
        # the upstream is gone, with the connection the layer kept; it comes back on its port
        async with serving({"/held": held.handle}, port=port):
            answers = [await _ask(session, upstream.url, f"after{index}") for index in range(3)]
    assert answers == [(200, {"id": f"after{index}"}) for index in range(3)]


# -- the layer's rules among concurrent requests -----------------------------------------------------

ROWS: Final = 8


@pytest.mark.asyncio
async def test_rules_hit_exactly_their_rows_among_concurrent_requests(hooked: Hooked) -> None:
    layer.reset(hooked.layer.url)
    _, history = hooked.context()

    async def run(session: aiohttp.ClientSession, row: int) -> tuple[int, bytes]:
        async with session.post(f"{hooked.url}/run", json={"_rowidx": row}) as answer:
            return answer.status, await answer.read()

    async with LayerControl(hooked.layer.url) as control, client_session(timeout_s=WAIT_S) as session:
        await control.arm("hooked", "http_error", match={"row": 2, "route": "/run"})
        await control.arm("hooked", "malformed_json", match={"row": 4, "route": "/run"})
        hang = await control.arm("hooked", "hang", match={"row": 5, "route": "/run"}, max_hang_s=WAIT_S)
        runs = [asyncio.ensure_future(run(session, row)) for row in range(ROWS)]
        done, _ = await asyncio.wait([runs[row] for row in range(ROWS) if row != 5], timeout=WAIT_S)
        assert not runs[5].done(), "the hung row is still held while the others are answered"
        await control.disarm(hang)
        answers = [await task for task in runs]
        await control.clear()
    assert len(done) == ROWS - 1
    for row, (status, body) in enumerate(answers):
        if row == 2:
            assert status == 500, body
            assert json.loads(body)["error"]["type"] == "chaos"
        elif row == 4:
            assert status == 200
            with pytest.raises(json.JSONDecodeError):
                json.loads(body)
        else:
            assert status == 200, (row, body)
            assert json.loads(body)["_rowidx"] == row, "each row gets its own answer"
    effects = ("http_error", "malformed_json", "hang")
    hits = sorted((hit["effect"], hit["row"]) for effect in effects for hit in hook_hits(history, effect))
    assert hits == [("hang", 5), ("http_error", 2), ("malformed_json", 4)]


# -- Toxiproxy in front of the same link ------------------------------------------------------------


@pytest.fixture(scope="module")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedProcess]:
    process = ManagedProcess(
        embedded_spec(seed=0, name="pool-toxiproxy"), tmp_path_factory.mktemp("toxiproxy")
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@contextlib.asynccontextmanager
async def _proxied(
    toxiproxy: ManagedProcess, upstream: Upstream
) -> AsyncIterator[tuple[ToxiproxyClient, str, str]]:
    """A Toxiproxy proxy in front of the layer's link: (client, proxy name, URL through it)."""
    async with ToxiproxyClient(toxiproxy.url) as api:
        name = f"pool-{uuid.uuid4().hex[:8]}"
        proxy = await api.create_proxy(name, upstream=upstream.url.removeprefix("http://"))
        try:
            yield api, name, f"http://{proxy.listen}"
        finally:
            await api.delete_proxy(name)


@pytest.mark.asyncio
async def test_a_proxy_going_down_cuts_only_the_requests_through_it(
    fault_layer: Layer, toxiproxy: ManagedProcess
) -> None:
    held = Held()
    history = fault_layer.history()
    async with (
        upstream_behind(fault_layer, {"/held": held.handle}) as upstream,
        _proxied(toxiproxy, upstream) as (api, name, through),
        client_session() as session,
    ):
        cut = asyncio.ensure_future(_ask(session, through, "through-proxy"))
        beside = asyncio.ensure_future(_ask(session, upstream.url, "beside"))
        await within(held.arrival("through-proxy"), "the proxied request reaches the upstream")
        await within(held.arrival("beside"), "the direct request reaches the upstream")
        await api.set_enabled(name, False)
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            await cut
        for _ in range(int(WAIT_S / 0.02)):
            if "through-proxy" in held.cancelled:
                break
            await asyncio.sleep(0.02)
        held.release.set()
        assert await beside == (200, {"id": "beside"})
        await api.set_enabled(name, True)
        assert await _ask(session, through, "again") == (200, {"id": "again"})
    assert held.cancelled == {"through-proxy"}, "the layer cancelled exactly the request whose client was cut"
    outcomes = _settled(history, upstream.server, 3)
    assert outcomes == {"through-proxy": ["info"], "beside": ["ok"], "again": ["ok"]}


@pytest.mark.asyncio
async def test_a_reset_peer_toxic_resets_only_the_clients_through_its_proxy(
    fault_layer: Layer, toxiproxy: ManagedProcess
) -> None:
    held = Held()
    history = fault_layer.history()
    async with (
        upstream_behind(fault_layer, {"/held": held.handle}) as upstream,
        _proxied(toxiproxy, upstream) as (api, name, through),
        client_session() as session,
    ):
        reset = asyncio.ensure_future(_ask(session, through, "through-proxy"))
        beside = asyncio.ensure_future(_ask(session, upstream.url, "beside"))
        await within(held.arrival("through-proxy"), "the proxied request reaches the upstream")
        await within(held.arrival("beside"), "the direct request reaches the upstream")
        toxic = await api.add_toxic(name, type="reset_peer", attributes={"timeout": 0})
        held.release.set()
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            await reset
        assert await beside == (200, {"id": "beside"})
        await api.remove_toxic(name, toxic.name)
        assert await _ask(session, through, "again") == (200, {"id": "again"})
    # the layer answered both: the toxic acts on the client's side of the proxy, after the layer
    outcomes = _settled(history, upstream.server, 3)
    assert outcomes == {"through-proxy": ["ok"], "beside": ["ok"], "again": ["ok"]}
    assert held.cancelled == set()


# -- streaming ---------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_answer_no_rule_rewrites_reaches_the_client_as_it_is_sent(fault_layer: Layer) -> None:
    first_seen = asyncio.Event()

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: one\n\n")
        # the rest is sent only once the client has the first event (or never: a buffering layer)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(first_seen.wait(), timeout=WAIT_S)
        await response.write(b"data: two\n\n")
        await response.write_eof()
        return response

    history = fault_layer.history()
    async with (
        upstream_behind(fault_layer, {"/events": events}) as upstream,
        client_session(timeout_s=3 * WAIT_S) as session,
    ):
        async with session.get(f"{upstream.url}/events") as answer:
            first = await answer.content.readuntil(b"\n\n")
            first_seen.set()
            rest = await answer.read()
        assert (first, rest) == (b"data: one\n\n", b"data: two\n\n")
    (ok,) = wait_for(history, lambda event: event.source == upstream.server and event.kind == "ok")
    assert ok.data["latency_ms"] < WAIT_S * 1000 / 2, "the second event came as soon as the first was read"


@pytest.mark.asyncio
async def test_a_json_answer_in_pieces_is_recorded_whole(fault_layer: Layer) -> None:
    body = json.dumps(
        {"output": [{"generation_token_ids": [7, 8, 9], "generation_log_probs": [-1.0, -0.5, -0.25]}]}
    )
    pieces = [body[:10], body[10:30], body[30:]]

    async def pieced(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece.encode())
            await asyncio.sleep(0.05)
        await response.write_eof()
        return response

    history = fault_layer.history()
    async with upstream_behind(fault_layer, {"/pieced": pieced}) as upstream, client_session() as session:
        async with session.post(f"{upstream.url}/pieced", json={}) as answer:
            received = await answer.read()
        async with LayerControl(fault_layer.process.url) as control:
            await control.arm(upstream.server, "nan_logprobs", match={"route": "/pieced"})
            async with session.post(f"{upstream.url}/pieced", json={}) as answer:
                rewritten = json.loads(await answer.read())
            await control.clear()
    assert received == body.encode()
    oks = wait_for(history, lambda event: event.source == upstream.server and event.kind == "ok")
    assert oks[0].data["generations"] == [fingerprint([7, 8, 9])]
    assert oks[0].data["logprobs"] == ["3:-1.750000:-2.750000"]
    assert all(math.isnan(value) for value in rewritten["output"][0]["generation_log_probs"]), (
        "a rule still rewrites it"
    )
