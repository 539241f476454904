"""latency: each chunk arrives `latency` ms (+- jitter) late: at least that, and within 5x of it
(the fast loop runs on busy machines; benchmarks/toxics.py prints the exact timings)."""

from __future__ import annotations

import time

import aiohttp
import pytest
from aiohttp import web

from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient
from tests.integration.toxiproxy._toxiproxy_testlib import Rig


@pytest.mark.asyncio
async def test_downstream_latency_delays_each_round_trip(echo_rig: Rig) -> None:
    client = await echo_rig.connect()
    try:
        assert await client.roundtrip_s() < 0.25  # the control: no toxic, no delay
        await echo_rig.api.add_toxic(echo_rig.proxy.name, type="latency", attributes={"latency": 300})
        rtts = [await client.roundtrip_s() for _ in range(2)]
    finally:
        client.close()
    for rtt in rtts:
        assert 0.300 <= rtt <= 1.5, rtts


@pytest.mark.asyncio
async def test_upstream_latency_with_jitter_stays_in_its_window(echo_rig: Rig) -> None:
    await echo_rig.api.add_toxic(
        echo_rig.proxy.name, type="latency", stream="upstream", attributes={"latency": 150, "jitter": 50}
    )
    client = await echo_rig.connect()
    try:
        rtts = [await client.roundtrip_s() for _ in range(4)]
    finally:
        client.close()
    for rtt in rtts:
        assert 0.100 <= rtt <= 0.5, rtts


@pytest.mark.asyncio
async def test_latency_on_a_real_http_server(api: ToxiproxyClient) -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/hello", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        proxy = await api.create_proxy("http-latency", upstream=f"127.0.0.1:{port}")
        await api.add_toxic(proxy.name, type="latency", attributes={"latency": 300})
        async with aiohttp.ClientSession() as session:
            start = time.monotonic()
            async with session.get(f"http://{proxy.listen_host}:{proxy.listen_port}/hello") as response:
                assert await response.json() == {"ok": True}
            elapsed = time.monotonic() - start
    finally:
        await runner.cleanup()
    assert 0.300 <= elapsed <= 1.5
