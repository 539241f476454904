"""latency through the embedded Toxiproxy: round trips slow by latency_ms (at least that, within 5x:
the fast loop runs on busy machines; benchmarks/toxics.py prints the exact timings), then recover."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.faults.latency import Latency
from tests.faults._applied import applied
from tests.faults._netrig import LINK, NetRig


@pytest.mark.asyncio
async def test_round_trips_slow_while_applied_and_recover_on_heal(echo_net: NetRig) -> None:
    client = await echo_net.connect()
    try:
        assert await client.roundtrip_s() < 0.25
        async with applied(Latency(target=LINK, latency_ms=250), echo_net.ctx) as facts:
            slowed = [await client.roundtrip_s() for _ in range(2)]
            assert await echo_net.toxic_names() == [facts["toxic"]]
        healed = await client.roundtrip_s()
    finally:
        client.close()
    for rtt in slowed:
        assert 0.25 <= rtt <= 1.25, slowed
    assert healed < 0.25  # the toxic adds at least 0.25 s
    assert await echo_net.toxic_names() == []
    inject = echo_net.history.events(source="fault", op="inject")[0]
    assert inject.data["latency_ms"] == 250
    assert inject.data["proxy"] == echo_net.proxy.name


@pytest.mark.asyncio
async def test_heal_twice_is_harmless(echo_net: NetRig) -> None:
    fault = Latency(target=LINK, latency_ms=10)
    async with applied(fault, echo_net.ctx):
        pass
    await fault.heal(echo_net.ctx)  # the toxic is gone already: nothing to do, no error
    assert await echo_net.toxic_names() == []
