"""reset_peer: the connection is reset (TCP RST, ConnectionResetError) once data flows, after `timeout` ms."""

from __future__ import annotations

import time

import pytest

from tests.integration.toxiproxy._toxiproxy_testlib import Rig, read_until_closed


@pytest.mark.asyncio
@pytest.mark.parametrize("timeout_ms", [0, 200])
async def test_reset_peer_resets_the_connection(echo_rig: Rig, timeout_ms: int) -> None:
    await echo_rig.api.add_toxic(echo_rig.proxy.name, type="reset_peer", attributes={"timeout": timeout_ms})
    client = await echo_rig.connect()
    start = time.monotonic()
    client.writer.write(b"hello\n")
    data, error = await read_until_closed(client, timeout_s=2.0)
    elapsed = time.monotonic() - start
    client.close()
    assert isinstance(error, ConnectionResetError), f"expected a reset, got EOF after {data!r}"
    assert data == b""
    assert elapsed >= timeout_ms / 1000 * 0.95
    assert elapsed < 1.0  # 5x the longest timeout; the read gives up at 2 s


@pytest.mark.asyncio
async def test_upstream_reset_peer_resets_the_client_too(echo_rig: Rig) -> None:
    await echo_rig.api.add_toxic(
        echo_rig.proxy.name, type="reset_peer", stream="upstream", attributes={"timeout": 0}
    )
    client = await echo_rig.connect()
    client.writer.write(b"hello\n")
    _data, error = await read_until_closed(client, timeout_s=2.0)
    client.close()
    assert isinstance(error, ConnectionResetError)
