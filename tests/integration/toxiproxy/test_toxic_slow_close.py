"""slow_close: the close reaches the client `delay` ms after the data."""

from __future__ import annotations

import time

import pytest

from tests.integration.toxiproxy._toxiproxy_testlib import Rig


async def _data_to_eof_s(rig: Rig) -> float:
    client = await rig.connect()
    client.writer.write(b"10\n")
    first = await client.reader.readexactly(10)
    start = time.monotonic()
    rest = await client.read_all()
    client.close()
    assert len(first) == 10
    assert rest == b""
    return time.monotonic() - start


@pytest.mark.asyncio
async def test_slow_close_delays_the_close(blast_rig: Rig) -> None:
    assert await _data_to_eof_s(blast_rig) < 0.25
    await blast_rig.api.add_toxic(blast_rig.proxy.name, type="slow_close", attributes={"delay": 300})
    assert 0.300 * 0.95 <= await _data_to_eof_s(blast_rig) <= 1.5
