"""The fault layer's control API in front of a real server: arm, match, list, disarm, refuse outsiders."""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import socket

import aiohttp
import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.servers.faultlayer import client as layer
from pytest_rollout_chaos.servers.faultlayer.client import LayerControl
from pytest_rollout_chaos.servers.loopback import peer_allowed
from tests.faults._hooked import Hooked, hook_hits


@pytest.fixture(autouse=True)
def _no_rule_armed(hooked: Hooked) -> None:
    """Each test starts with no rule armed, whatever a failed test before it left."""
    layer.reset(hooked.layer.url)


async def _statuses(hooked: Hooked, path: str, count: int) -> list[int]:
    return [(await hooked.post(path, {"_rowidx": index}))[0] for index in range(count)]


@pytest.mark.asyncio
async def test_every_and_count_then_list_and_disarm(hooked: Hooked) -> None:
    _, history = hooked.context()
    async with LayerControl(hooked.layer.url) as control:
        rule = await control.arm(
            "hooked", "http_error", match={"route": "/run", "every": 2, "count": 2}, status=502
        )
        statuses = await _statuses(hooked, "/run", 6)
        (listed,) = await control.rules()
        assert await control.disarm(rule)
        assert not await control.disarm(rule), "a second disarm finds nothing and says so"
        assert await control.rules() == []
    assert statuses == [502, 200, 502, 200, 200, 200]
    assert (listed["id"], listed["server"], listed["candidates"], listed["hits"]) == (rule, "hooked", 6, 2)
    hits = hook_hits(history, "http_error")
    assert [(hit["rule"], hit["row"], hit["route"]) for hit in hits] == [(rule, 0, "/run"), (rule, 2, "/run")]
    assert {(hit["link"], hit["server"]) for hit in hits} == {("client->hooked", "hooked")}


@pytest.mark.asyncio
async def test_prefix_routes_and_clear_by_tag(hooked: Hooked) -> None:
    async with LayerControl(hooked.layer.url) as control:
        await control.arm("hooked", "http_error", match={"route": "/v1/*"}, status=500, tag="mine")
        await control.arm("hooked", "http_error", match={"route": "/run"}, status=500, tag="theirs")
        assert (await hooked.post("/v1/completions"))[0] == 500
        assert (await hooked.post("/v1/responses"))[0] == 500
        assert len(await control.clear(tag="mine")) == 1
        assert (await hooked.post("/v1/completions"))[0] == 200
        assert (await hooked.post("/run"))[0] == 500
        assert len(await control.clear()) == 1
    assert (await hooked.post("/run"))[0] == 200


@pytest.mark.asyncio
async def test_probability_is_seeded_and_reproducible(hooked: Hooked) -> None:
    async with LayerControl(hooked.layer.url) as control:
        rule = await control.arm("hooked", "http_error", match={"route": "/run", "probability": 0.5}, seed=42)
        statuses = await _statuses(hooked, "/run", 24)
        await control.clear()
    coin = random.Random(f"42:{rule}")
    expected = [500 if coin.random() < 0.5 else 200 for _ in range(24)]
    assert statuses == expected
    assert 6 <= statuses.count(500) <= 18


async def _post_rule(hooked: Hooked, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5.0)) as session,
        session.post(f"{hooked.layer.url}/rules", json=body) as response,
    ):
        return response.status, await response.json()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"effect": "explode"},
            r"effect: unknown effect 'explode' \(known: delay, hang, http_error, logprob_drift, "
            r"malformed_json, ",
        ),
        ({"effect": "delay", "match": {"nth": 0}}, r"match.nth: expected an integer >= 1, got 0"),
        ({"effect": "delay", "match": {"rout": "/x"}}, r"match.rout: unknown key \(known: route, row, "),
        ({"effect": "nan_logprobs", "shape": "NaN"}, r"shape: expected one of nan, null, inf, http_500"),
        ({"effect": "delay", "delay": 5}, r"delay: unknown parameter for effect 'delay' \(known: delay_ms, "),
        ({"effect": "http_error", "status": 200}, r"status: expected an HTTP error status 400..599"),
        ({"server": "", "effect": "delay"}, r"server: expected the name of the server the rule applies to"),
    ],
)
async def test_invalid_rules_are_refused_naming_the_field(
    hooked: Hooked, body: dict[str, object], message: str
) -> None:
    status, answer = await _post_rule(hooked, {"server": "hooked", **body})
    assert status == 400
    assert re.search(message, str(answer["error"])), answer


@pytest.mark.asyncio
async def test_layer_control_raises_fault_error_with_the_layers_message(hooked: Hooked) -> None:
    async with LayerControl(hooked.layer.url) as control:
        with pytest.raises(FaultError, match=r"answered 400: .*unknown effect 'nope'"):
            await control.arm("hooked", "nope")
    async with LayerControl("http://127.0.0.1:9", timeout_s=1.0) as dead:
        with pytest.raises(FaultError, match="is the fault layer running"):
            await dead.rules()


@pytest.mark.asyncio
async def test_arming_on_an_unknown_server_lists_the_servers_behind_the_layer(hooked: Hooked) -> None:
    async with LayerControl(hooked.layer.url) as control:
        with pytest.raises(
            FaultError,
            match=r"answered 400: server: no link leads to 'polcy' \(servers behind the layer: hooked\)",
        ):
            await control.arm("polcy", "http_error")
        assert await control.rules() == [], "a refused rule is not armed"


@pytest.mark.asyncio
async def test_a_chunked_answer_reaches_the_layer_whole_and_is_rewritten(hooked: Hooked) -> None:
    _, history = hooked.context()
    async with LayerControl(hooked.layer.url) as control:
        await control.arm("hooked", "nan_logprobs", match={"route": "/stream"})
        status, body = await hooked.post("/stream")
        await control.clear()
    assert status == 200
    (value,) = json.loads(body)["generation_log_probs"]
    assert math.isnan(value), body
    assert hook_hits(history, "nan_logprobs")[0]["changed"] == 1


def test_only_the_loopback_peer_itself_is_allowed() -> None:
    assert peer_allowed("127.0.0.1")
    assert peer_allowed("::1")
    assert not peer_allowed("127.0.0.2")
    assert not peer_allowed("10.1.2.3")
    assert not peer_allowed(None)


def _raw_get_from(source: str, host: str, port: int, path: str) -> bytes:
    with socket.create_connection((host, port), timeout=5.0, source_address=(source, 0)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.asyncio
async def test_the_control_api_refuses_a_peer_on_another_address_the_link_does_not(hooked: Hooked) -> None:
    address = hooked.layer.address()
    assert address is not None, "the layer is ready, so its address is known"
    host, port = address
    try:
        outsider = await asyncio.to_thread(_raw_get_from, "127.0.0.2", host, port, "/rules")
    except OSError as error:
        pytest.skip(f"cannot bind a client to 127.0.0.2 here: {error}")
    insider = await asyncio.to_thread(_raw_get_from, "127.0.0.1", host, port, "/rules")
    assert outsider.startswith(b"HTTP/1.1 403"), outsider[:200]
    assert b"answers loopback only; peer '127.0.0.2' refused" in outsider
    assert insider.startswith(b"HTTP/1.1 200"), insider[:200]
    link_host, _, link_port = hooked.url.removeprefix("http://").rpartition(":")
    assert int(link_port) != port, "the link has its own port, apart from the control API"
    forwarded = await asyncio.to_thread(_raw_get_from, "127.0.0.2", link_host, int(link_port), "/health")
    assert forwarded.startswith(b"HTTP/1.1 200"), "a link forwards for any peer, as the server would"
    assert b'"status": "ok"' in forwarded, forwarded[-200:]
