"""bandwidth: `rate` KB/s (K = 1000 bytes) over 50 KB: no faster than the rate, and within 5x of it
(the fast loop runs on busy machines; benchmarks/toxics.py prints the exact timings)."""

from __future__ import annotations

import time

import pytest

from tests.integration.toxiproxy._toxiproxy_testlib import Rig


@pytest.mark.asyncio
async def test_downstream_bandwidth_limits_the_rate(blast_rig: Rig) -> None:
    await blast_rig.api.add_toxic(blast_rig.proxy.name, type="bandwidth", attributes={"rate": 100})
    client = await blast_rig.connect()
    start = time.monotonic()
    client.writer.write(b"50000\n")
    data = await client.read_all()
    elapsed = time.monotonic() - start
    client.close()
    assert len(data) == 50_000
    assert 0.4 <= elapsed <= 2.0, f"50 KB at 100 KB/s (0.5 s) took {elapsed:.3f}s"


@pytest.mark.asyncio
async def test_without_the_toxic_the_same_transfer_is_fast(blast_rig: Rig) -> None:
    client = await blast_rig.connect()
    start = time.monotonic()
    client.writer.write(b"50000\n")
    data = await client.read_all()
    client.close()
    assert len(data) == 50_000
    assert time.monotonic() - start < 0.25  # the toxic's 50 KB take at least 0.4 s
