"""limit_data through the embedded Toxiproxy: the response is cut at exactly limit_bytes."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.faults.limit_data import LimitData
from tests.faults._applied import applied
from tests.faults._netrig import LINK, NetRig
from tests.integration.toxiproxy._toxiproxy_testlib import read_until_closed


@pytest.mark.asyncio
async def test_truncation_at_the_byte_count(blast_net: NetRig) -> None:
    async with applied(LimitData(target=LINK, limit_bytes=1000), blast_net.ctx):
        client = await blast_net.connect()
        try:
            client.writer.write(b"10000\n")
            data, _ = await read_until_closed(client, timeout_s=5.0)
        finally:
            client.close()
    assert len(data) == 1000
    assert data == (bytes(range(256)) * 4)[:1000]
