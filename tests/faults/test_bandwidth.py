"""bandwidth through the embedded Toxiproxy: a transfer takes size / rate (within 20 %)."""

from __future__ import annotations

import time

import pytest

from pytest_rollout_chaos.faults.bandwidth import Bandwidth
from tests.faults._applied import applied
from tests.faults._netrig import LINK, NetRig


@pytest.mark.asyncio
async def test_transfer_time_follows_the_rate(blast_net: NetRig) -> None:
    async with applied(Bandwidth(target=LINK, rate_kb_per_s=40), blast_net.ctx):
        client = await blast_net.connect()
        try:
            started = time.monotonic()
            client.writer.write(b"16000\n")
            data = await client.read_all(timeout_s=5.0)
            took_s = time.monotonic() - started
        finally:
            client.close()
    assert len(data) == 16000
    assert took_s == pytest.approx(16000 / 40_000, rel=0.2)
