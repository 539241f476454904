"""Toxics added, updated and removed take effect on connections that are already open."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.toxiproxy._toxiproxy_testlib import ApiUnderTest, Rig, read_until_closed


@pytest.mark.asyncio
async def test_toxic_changes_apply_to_an_open_connection(echo_rig: Rig) -> None:
    api, name = echo_rig.api, echo_rig.proxy.name
    client = await echo_rig.connect()
    try:
        assert await client.roundtrip_s() < 0.25
        # Lower bounds show a toxic acts; 300 ms (at least 0.3 s) against the rest (under 0.25 s) tells
        # the update and the removal apart.
        await api.add_toxic(name, type="latency", attributes={"latency": 50})
        assert 0.050 <= await client.roundtrip_s() < 0.25
        updated = await api.update_toxic(name, "latency_downstream", attributes={"latency": 300})
        assert updated.attributes["latency"] == 300
        assert 0.300 <= await client.roundtrip_s() <= 1.5
        await api.remove_toxic(name, "latency_downstream")
        assert await client.roundtrip_s() < 0.25
    finally:
        client.close()


@pytest.mark.asyncio
async def test_removing_a_toxic_mid_delay_loses_no_data(echo_rig: Rig) -> None:
    api, name = echo_rig.api, echo_rig.proxy.name
    client = await echo_rig.connect()
    try:
        await api.add_toxic(name, type="latency", attributes={"latency": 2000})
        client.writer.write(b"in flight\n")
        await client.writer.drain()
        await asyncio.sleep(0.2)  # the echo is back at the proxy, held by the latency toxic
        await api.remove_toxic(name, "latency_downstream")
        assert await asyncio.wait_for(client.reader.readexactly(10), 2.0) == b"in flight\n"
    finally:
        client.close()


@pytest.mark.asyncio
async def test_reset_peer_added_to_an_open_connection_ends_it(
    echo_rig: Rig, toxiproxy_api: ApiUnderTest
) -> None:
    client = await echo_rig.connect()
    try:
        assert await client.roundtrip_s() < 0.25
        await echo_rig.api.add_toxic(echo_rig.proxy.name, type="reset_peer", attributes={"timeout": 0})
        client.writer.write(b"hello\n")
        data, error = await read_until_closed(client, timeout_s=2.0)
    finally:
        client.close()
    assert data == b""
    if toxiproxy_api.kind == "embedded":
        # The real server sets SO_LINGER 0 only on links that had the toxic at their start, so
        # there a toxic added later ends the connection with a plain close; ours always resets.
        assert isinstance(error, ConnectionResetError)
