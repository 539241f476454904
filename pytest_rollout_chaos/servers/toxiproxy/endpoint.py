"""One socket of a proxied connection, as the two links that use it see it.

A connection has two sockets (the client's and the upstream's) and two links (one per direction);
each socket is the source of one link and the destination of the other. The socket calls its
reading link back on each piece of data and at its end, and its writing link when a full write
buffer has drained. Callbacks rather than a reader task: with no toxic on a link, a piece of
data is written on from inside ``data_received``, with no task switch, which is most of what
a relay costs per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from typing import cast

from pytest_rollout_chaos.servers.writeflow import WriteFlow


class Endpoint(WriteFlow):
    """A socket; what arrives before a link reads it (``attach``) waits for that link."""

    def __init__(self, on_made: Callable[[Endpoint], None] | None = None) -> None:
        self._on_made = on_made
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self._reading = False
        self._early: list[bytes] = []
        self._ended: tuple[Exception | None] | None = None
        # the link reading from this socket; until one does, what arrives waits here
        self.on_data: Callable[[bytes], None] = self._early.append
        self.on_end: Callable[[Exception | None], None] = self._early_end
        # the link writing to it
        self.on_writable: Callable[[], None] = lambda: None

    # -- asyncio.Protocol -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport; uvloop's do not subclass asyncio.Transport
        self.transport = cast(asyncio.Transport, transport)
        self.transport.pause_reading()
        if self._on_made is not None:
            self._on_made(self)

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def eof_received(self) -> bool:
        self.on_end(None)
        return True  # the socket stays open for writing until the link says otherwise

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._release_writers()
        self.on_end(exc)

    def resume_writing(self) -> None:
        super().resume_writing()
        self.on_writable()

    # -- the reading link -----------------------------------------------------------------------
    def attach(self, on_data: Callable[[bytes], None], on_end: Callable[[Exception | None], None]) -> None:
        self.on_data, self.on_end = on_data, on_end
        early, self._early = self._early, []
        for data in early:
            on_data(data)
        if self._ended is not None:
            on_end(self._ended[0])
        else:
            self.resume_reading()

    def _early_end(self, error: Exception | None) -> None:
        if self._ended is None:
            self._ended = (error,)

    def pause_reading(self) -> None:
        if self._reading and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
            self._reading = False

    def resume_reading(self) -> None:
        if not self._reading and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
            self._reading = True

    # -- the writing link -----------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.lost or self.transport is None:
            raise ConnectionResetError("the socket is closed")
        self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the write buffer is full; raise once the socket is gone."""
        await self.drained()
        if self.lost:
            raise ConnectionResetError("the socket is closed")

    # -- ending ---------------------------------------------------------------------------------
    def peer(self) -> tuple[str, int] | None:
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        return (str(peer[0]), int(peer[1])) if peer else None

    def close(self) -> None:
        """Close after what was written leaves."""
        if self.transport is not None:
            self.transport.close()

    def abort(self, *, reset: bool = False) -> None:
        """Close now, dropping what is unsent; with ``reset``, with a TCP RST (SO_LINGER 0)."""
        if self.transport is None:
            return
        if reset:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()
