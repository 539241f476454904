"""down through the embedded Toxiproxy: connection refused, open connections closed; heal restores."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.faults.down import Down
from tests.faults._applied import applied
from tests.faults._netrig import LINK, NetRig
from tests.integration.toxiproxy._toxiproxy_testlib import read_until_closed


@pytest.mark.asyncio
async def test_refused_and_closed_while_down(echo_net: NetRig) -> None:
    open_client = await echo_net.connect()
    try:
        assert await open_client.roundtrip_s() < 0.25
        async with applied(Down(target=LINK), echo_net.ctx):
            data, _ = await read_until_closed(open_client, timeout_s=5.0)
            assert data == b"", "the open connection is closed"
            with pytest.raises(ConnectionRefusedError):
                await echo_net.connect()
    finally:
        open_client.close()
    healed = await echo_net.connect()
    try:
        assert await healed.roundtrip_s() < 0.25
    finally:
        healed.close()
