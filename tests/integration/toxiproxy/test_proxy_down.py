"""down (enabled: false): new connections are refused AND open ones are closed; enable restores it."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.toxiproxy._toxiproxy_testlib import Client, Rig, read_until_closed


@pytest.mark.asyncio
async def test_disable_refuses_new_and_closes_open_connections(echo_rig: Rig) -> None:
    client = await echo_rig.connect()
    assert await client.roundtrip_s() < 0.25
    disabled = await echo_rig.api.set_enabled(echo_rig.proxy.name, False)
    assert disabled.enabled is False
    _data, _error = await read_until_closed(client, timeout_s=2.0)  # EOF or reset, but closed
    client.close()
    with pytest.raises(ConnectionRefusedError):
        await Client.connect(echo_rig.proxy)

    enabled = await echo_rig.api.set_enabled(echo_rig.proxy.name, True)
    assert enabled.listen == echo_rig.proxy.listen  # the same port again
    again = await echo_rig.connect()
    try:
        assert await again.roundtrip_s() < 0.25
    finally:
        again.close()


@pytest.mark.asyncio
async def test_reset_enables_disabled_proxies(echo_rig: Rig) -> None:
    await echo_rig.api.set_enabled(echo_rig.proxy.name, False)
    await echo_rig.api.reset()
    assert (await echo_rig.api.proxies())[echo_rig.proxy.name].enabled
    client = await echo_rig.connect()
    try:
        assert await client.roundtrip_s() < 0.25
    finally:
        client.close()


@pytest.mark.asyncio
async def test_unreachable_upstream_accepts_then_closes(echo_rig: Rig) -> None:
    await echo_rig.target.stop()
    client = await echo_rig.connect()
    client.writer.write(b"hello\n")
    data, _error = await read_until_closed(client, timeout_s=2.0)
    client.close()
    assert data == b""
    await asyncio.sleep(0)
