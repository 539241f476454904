"""Write flow control for a protocol: writers wait while the transport's buffer is full.

The relays (the fault layer's two sides, the embedded Toxiproxy's sockets) write from protocol
callbacks, with no stream object between; each waits here, as ``StreamWriter.drain`` would.
"""

from __future__ import annotations

import asyncio


class WriteFlow(asyncio.Protocol):
    """A protocol whose writers wait while the transport's write buffer is over its high-water mark."""

    _drained: asyncio.Future[None] | None = None

    @property
    def full(self) -> bool:
        """The write buffer is over its high-water mark, and the connection is still there."""
        return self._drained is not None and not self._drained.done()

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._release_writers()
        self._drained = None

    def _release_writers(self) -> None:
        """Let waiting writers go on (the buffer drained, or the connection is gone)."""
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    async def drained(self) -> None:
        if self._drained is not None:
            await self._drained
