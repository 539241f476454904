"""bandwidth through the embedded Toxiproxy: a transfer takes size / rate, and within 5x of it (the
fast loop runs on busy machines; benchmarks/toxics.py prints the exact timings)."""

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
    assert 0.32 <= took_s <= 1.6  # 16 KB at 40 KB/s: 0.4 s
