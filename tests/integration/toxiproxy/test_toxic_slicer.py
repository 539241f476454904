"""slicer: data arrives in pieces of about `average_size` bytes, `delay` microseconds apart."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.toxiproxy._toxiproxy_testlib import Client, Rig

PAYLOAD = bytes(range(100))


async def _pieces(client: Client) -> list[bytes]:
    client.writer.write(PAYLOAD)
    pieces: list[bytes] = []
    while sum(map(len, pieces)) < len(PAYLOAD):
        pieces.append(await asyncio.wait_for(client.reader.read(1024), 2.0))
    return pieces


@pytest.mark.asyncio
async def test_slicer_cuts_data_into_small_pieces(echo_rig: Rig) -> None:
    client = await echo_rig.connect()
    try:
        assert len(await _pieces(client)) == 1  # the control: one write, one read
        await echo_rig.api.add_toxic(
            echo_rig.proxy.name,
            type="slicer",
            attributes={"average_size": 10, "size_variation": 4, "delay": 20_000},
        )
        pieces = await _pieces(client)
    finally:
        client.close()
    assert b"".join(pieces) == PAYLOAD
    assert len(pieces) >= 100 // 14
    assert max(map(len, pieces)) <= 10 + 4, [len(piece) for piece in pieces]
