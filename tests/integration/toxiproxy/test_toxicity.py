"""toxicity: the probability a toxic applies to a connection; 0 never, 1 always, seeded in between."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient
from tests.integration.toxiproxy._toxiproxy_testlib import Client, Rig, TcpTarget, echo


@pytest.mark.asyncio
@pytest.mark.parametrize(("toxicity", "delayed"), [(0.0, False), (1.0, True)])
async def test_toxicity_zero_and_one(echo_rig: Rig, toxicity: float, delayed: bool) -> None:
    await echo_rig.api.add_toxic(
        echo_rig.proxy.name, type="latency", toxicity=toxicity, attributes={"latency": 200}
    )
    client = await echo_rig.connect()
    try:
        rtt = await client.roundtrip_s()
    finally:
        client.close()
    assert (rtt >= 0.200) is delayed, rtt


async def _pattern(url: str, target: TcpTarget) -> list[bool]:
    async with ToxiproxyClient(url) as api:
        proxy = await api.create_proxy("seeded", upstream=target.address)
        await api.add_toxic(proxy.name, type="latency", toxicity=0.5, attributes={"latency": 150})
        delayed = []
        for _ in range(10):
            client = await Client.connect(proxy)
            try:
                delayed.append(await client.roundtrip_s() >= 0.150)
            finally:
                client.close()
        return delayed


@pytest.mark.asyncio
async def test_same_seed_same_choices(start_embedded: Callable[..., ManagedProcess]) -> None:
    """Embedded only: the real server ignores -seed (Shopify/toxiproxy#610)."""
    target = await TcpTarget(echo).start()
    try:
        first = await _pattern(start_embedded(seed=7).url, target)
        second = await _pattern(start_embedded(seed=7).url, target)
    finally:
        await target.stop()
    assert first == second
    assert True in first
    assert False in first
