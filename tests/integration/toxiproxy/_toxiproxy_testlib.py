"""Real targets for the Toxiproxy tests: TCP servers in the test's loop, and timing helpers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pytest_rollout_chaos.servers.toxiproxy.client import ProxyInfo, ToxiproxyClient

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class TcpTarget:
    """A loopback TCP server whose connections are all closed on ``stop``."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections = 0

    async def start(self) -> TcpTarget:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    @property
    def address(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            await self._handler(reader, writer)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for writer in self._writers:
            writer.transport.abort()
        await asyncio.sleep(0)


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Send back whatever arrives, until EOF."""
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()


async def blast(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read a line with a byte count N, send N bytes of a repeating pattern, then close."""
    line = await reader.readline()
    count = int(line.strip() or b"0")
    pattern = bytes(range(256)) * (count // 256 + 1)
    writer.write(pattern[:count])
    await writer.drain()


class Client:
    """One TCP client connection through a proxy."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, proxy: ProxyInfo) -> Client:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(proxy.listen_host, proxy.listen_port), 5.0
        )
        return cls(reader, writer)

    async def roundtrip_s(self, payload: bytes = b"ping\n", timeout_s: float = 5.0) -> float:
        """Send ``payload`` to an echo target and time until all of it is back."""
        start = time.monotonic()
        self.writer.write(payload)
        await self.writer.drain()
        received = await asyncio.wait_for(self.reader.readexactly(len(payload)), timeout_s)
        assert received == payload
        return time.monotonic() - start

    async def read_all(self, timeout_s: float = 5.0) -> bytes:
        """Everything until EOF."""
        return await asyncio.wait_for(self.reader.read(), timeout_s)

    def close(self) -> None:
        self.writer.transport.abort()


async def read_until_closed(client: Client, timeout_s: float = 5.0) -> tuple[bytes, BaseException | None]:
    """All bytes until EOF or reset, and the error that ended it (None for a clean EOF)."""
    chunks = []
    try:
        async with asyncio.timeout(timeout_s):
            while data := await client.reader.read(65536):
                chunks.append(data)
    except ConnectionResetError as error:
        return b"".join(chunks), error
    return b"".join(chunks), None


@dataclass(frozen=True, slots=True)
class ApiUnderTest:
    """The Toxiproxy API a conformance test runs against."""

    kind: str  # "embedded" | "real"
    url: str


@dataclass
class Rig:
    """A target server, a proxy in front of it, and the client of the API."""

    api: ToxiproxyClient
    target: TcpTarget
    proxy: ProxyInfo

    async def connect(self) -> Client:
        return await Client.connect(self.proxy)
