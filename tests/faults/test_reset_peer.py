"""reset_peer through the embedded Toxiproxy: the client sees ConnectionResetError."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.faults.reset_peer import ResetPeer
from tests.faults._applied import applied
from tests.faults._netrig import LINK, NetRig
from tests.integration.toxiproxy._toxiproxy_testlib import read_until_closed


@pytest.mark.asyncio
async def test_connection_is_reset(echo_net: NetRig) -> None:
    async with applied(ResetPeer(target=LINK, timeout_ms=0), echo_net.ctx):
        client = await echo_net.connect()
        try:
            client.writer.write(b"ping\n")
            data, error = await read_until_closed(client, timeout_s=5.0)
        finally:
            client.close()
    assert data == b""
    assert isinstance(error, ConnectionResetError)
