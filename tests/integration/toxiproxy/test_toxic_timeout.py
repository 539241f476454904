"""timeout: data stops; with 0 the line stays open and silent until the toxic goes (then it closes)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.toxiproxy._toxiproxy_testlib import Rig, read_until_closed


@pytest.mark.asyncio
async def test_timeout_zero_blackholes_until_removed(echo_rig: Rig) -> None:
    await echo_rig.api.add_toxic(echo_rig.proxy.name, type="timeout", attributes={"timeout": 0})
    client = await echo_rig.connect()
    try:
        client.writer.write(b"hello\n")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.reader.read(100), 0.5)  # a read timeout, not EOF
        await echo_rig.api.remove_toxic(echo_rig.proxy.name, "timeout_downstream")
        data, _error = await read_until_closed(client, timeout_s=2.0)
    finally:
        client.close()
    assert data == b""  # removing the toxic closes the connection; the dropped data stays dropped


@pytest.mark.asyncio
async def test_timeout_closes_the_connection_after_the_delay(echo_rig: Rig) -> None:
    await echo_rig.api.add_toxic(echo_rig.proxy.name, type="timeout", attributes={"timeout": 300})
    start = time.monotonic()  # the toxic's clock starts with the connection, as Toxiproxy's does
    client = await echo_rig.connect()
    client.writer.write(b"hello\n")
    data, _error = await read_until_closed(client, timeout_s=2.0)
    elapsed = time.monotonic() - start
    client.close()
    assert data == b""
    assert 0.300 * 0.95 <= elapsed <= 1.5
