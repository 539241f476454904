"""slow_close through the embedded Toxiproxy: the close reaches the client delay_ms late."""

from __future__ import annotations

import time

import pytest

from pytest_rollout_chaos.faults.slow_close import SlowClose
from tests.faults._applied import applied
from tests.faults._netrig import LINK, NetRig


@pytest.mark.asyncio
async def test_eof_arrives_late(blast_net: NetRig) -> None:
    async with applied(SlowClose(target=LINK, delay_ms=300), blast_net.ctx):
        client = await blast_net.connect()
        try:
            started = time.monotonic()
            client.writer.write(b"10\n")
            data = await client.read_all(timeout_s=5.0)
            took_s = time.monotonic() - started
        finally:
            client.close()
    assert len(data) == 10
    assert 0.285 <= took_s <= 1.5  # delay_ms=300
