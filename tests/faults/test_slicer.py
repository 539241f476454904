"""slicer through the embedded Toxiproxy: the data arrives complete, in many small pieces."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rollout_chaos.faults.slicer import Slicer
from tests.faults._applied import applied
from tests.faults._netrig import LINK, NetRig


@pytest.mark.asyncio
async def test_data_is_cut_into_small_pieces(blast_net: NetRig) -> None:
    async with applied(Slicer(target=LINK, average_size_bytes=20, delay_us=2000), blast_net.ctx):
        client = await blast_net.connect()
        try:
            client.writer.write(b"400\n")
            pieces = []
            while piece := await asyncio.wait_for(client.reader.read(65536), 5.0):
                pieces.append(piece)
        finally:
            client.close()
    sizes = sorted(len(piece) for piece in pieces)
    assert sum(sizes) == 400
    assert len(sizes) >= 10, sizes
    # a piece may reach the reader with the next one when the machine is busy: most arrive alone
    assert sizes[len(sizes) // 2] <= 40, sizes
