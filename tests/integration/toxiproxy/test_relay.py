"""The relay with no toxic on it: what a server says before the client does reaches the client,
and a destination that reads nothing holds the source back instead of filling the proxy."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest

from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient
from tests.integration.toxiproxy._toxiproxy_testlib import Client, TcpTarget

MIB = 1024 * 1024
PUSH_AT_MOST = 160 * MIB
# Loopback socket buffers grow to a few MiB each; four of them lie between client and server.
HELD_BACK_WITHIN = 48 * MIB


@pytest.mark.asyncio
async def test_a_server_that_speaks_first_is_heard(api: ToxiproxyClient) -> None:
    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"220 ready\r\n")
        await writer.drain()
        await reader.read()

    target = await TcpTarget(greet).start()
    try:
        proxy = await api.create_proxy(f"test-{uuid.uuid4().hex[:8]}", upstream=target.address)
        client = await Client.connect(proxy)
        try:
            assert await asyncio.wait_for(client.reader.readexactly(11), 5.0) == b"220 ready\r\n"
        finally:
            client.close()
    finally:
        await target.stop()


@pytest.mark.asyncio
async def test_a_destination_that_reads_nothing_holds_the_source_back(api: ToxiproxyClient) -> None:
    reading = asyncio.Event()
    received = bytearray()

    async def read_later(reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
        await reading.wait()
        while data := await reader.read(MIB):
            received.extend(data)

    target = await TcpTarget(read_later).start()
    try:
        proxy = await api.create_proxy(f"test-{uuid.uuid4().hex[:8]}", upstream=target.address)
        client = await Client.connect(proxy)
        try:
            piece = bytes(range(256)) * (MIB // 256)
            written = 0
            with contextlib.suppress(TimeoutError):
                while written < PUSH_AT_MOST:
                    client.writer.write(piece)
                    written += len(piece)
                    await asyncio.wait_for(client.writer.drain(), 1.0)
            assert written < HELD_BACK_WITHIN, (
                f"the proxy took {written // MIB} MiB for a server that reads nothing: it does not "
                "stop reading its source while the destination is full"
            )
            reading.set()
            async with asyncio.timeout(20.0):
                while len(received) < written:
                    await asyncio.sleep(0.05)
            assert received == piece * (written // len(piece))
        finally:
            client.close()
    finally:
        await target.stop()
