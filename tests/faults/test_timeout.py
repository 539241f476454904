"""timeout through the embedded Toxiproxy: a blackhole (read timeout), or a close after timeout_ms."""

from __future__ import annotations

import asyncio
import time

import pytest

from pytest_rollout_chaos.faults.timeout import Timeout
from tests.faults._applied import applied
from tests.faults._netrig import LINK, NetRig
from tests.integration.toxiproxy._toxiproxy_testlib import read_until_closed


@pytest.mark.asyncio
async def test_zero_is_a_blackhole_seen_as_a_read_timeout(echo_net: NetRig) -> None:
    client = await echo_net.connect()
    try:
        async with applied(Timeout(target=LINK, timeout_ms=0), echo_net.ctx):
            with pytest.raises(asyncio.TimeoutError):
                await client.roundtrip_s(timeout_s=0.5)
    finally:
        client.close()
    fresh = await echo_net.connect()
    try:
        assert await fresh.roundtrip_s() < 0.25, "healing lets data through again"
    finally:
        fresh.close()


@pytest.mark.asyncio
async def test_a_timeout_closes_the_connection_without_data(echo_net: NetRig) -> None:
    async with applied(Timeout(target=LINK, timeout_ms=300), echo_net.ctx):
        client = await echo_net.connect()
        try:
            started = time.monotonic()
            client.writer.write(b"ping\n")
            data, _ = await read_until_closed(client, timeout_s=5.0)
            took_s = time.monotonic() - started
        finally:
            client.close()
    assert data == b""
    assert 0.285 <= took_s <= 1.5  # timeout_ms=300
