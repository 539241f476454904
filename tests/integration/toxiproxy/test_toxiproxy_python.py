"""toxiproxy-python 0.1.1, unchanged, drives the embedded server (via the fixture's helper)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_rollout_chaos.servers.toxiproxy.client import ProxyInfo
from pytest_rollout_chaos.servers.toxiproxy.controller import ToxiproxyServer
from pytest_rollout_chaos.servers.toxiproxy.handle import ChaosToxiproxy
from tests.integration.toxiproxy._toxiproxy_testlib import Client, TcpTarget, echo


async def _rtt(listen: str) -> float:
    client = await Client.connect(ProxyInfo("p", listen, "", True))
    try:
        rtt: float = await client.roundtrip_s()
        return rtt
    finally:
        client.close()


@pytest.mark.asyncio
async def test_toxiproxy_python_creates_toxics_and_disables(start_embedded: Any) -> None:
    process = start_embedded()
    handle = ChaosToxiproxy(ToxiproxyServer("embedded", process.url, lambda: None))
    target = await TcpTarget(echo).start()
    try:
        tp = handle.toxiproxy_python()
        assert b'"version"' in await asyncio.to_thread(tp.version)
        proxy = await asyncio.to_thread(tp.create, upstream=target.address, name="tp-python")
        assert not proxy.listen.endswith(":0")
        await asyncio.to_thread(proxy.add_toxic, type="latency", attributes={"latency": 300})
        assert list(await asyncio.to_thread(proxy.toxics)) == ["latency_downstream"]
        assert 0.300 <= await _rtt(proxy.listen) <= 0.360
        assert await asyncio.to_thread(proxy.destroy_toxic, "latency_downstream") is True
        assert await _rtt(proxy.listen) < 0.05
        await asyncio.to_thread(proxy.disable)
        with pytest.raises(ConnectionRefusedError):
            await _rtt(proxy.listen)
        await asyncio.to_thread(proxy.enable)
        assert await _rtt(proxy.listen) < 0.05
        assert await asyncio.to_thread(tp.reset) is True
        await asyncio.to_thread(tp.destroy, proxy)
        assert await asyncio.to_thread(tp.proxies) == {}
    finally:
        await target.stop()
