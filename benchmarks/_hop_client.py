"""The hop benchmark's client: one keep-alive HTTP/1.1 connection, one request at a time.

It reads only the framing of an answer (``Content-Length``) and the one header the burst needs,
so the client costs the same on every path and the difference between paths is the relays'.
Every request carries its own ``X-Request-Id``, which the fault layer records as the request's
id: the benchmark looks each one up in the layer's History afterwards.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Final, cast

REQUEST_BODY: Final = (
    b'{"model": "hops", "messages": [{"role": "user", "content": "What is 17 times 23? Think first."}],'
    b' "max_tokens": 2048, "logprobs": true, "return_tokens_as_token_ids": true}'
)
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer as the client saw it: its request's id, body size, when its last byte came
    (``time.monotonic()``), and the ``X-Released`` header a burst answer carries."""

    request_id: str
    size: int
    done_at: float
    released_at: float | None


class Connection(asyncio.Protocol):
    """A keep-alive client connection; ``ask`` sends one request and waits for its whole answer."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Reply] | None = None
        self._request_id = ""
        self._head: tuple[int, float | None] | None = None  # (body end in the buffer, released)
        self._lost: BaseException | None = None

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        _, connection = await asyncio.get_running_loop().create_connection(cls, host, port)
        return connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    async def ask(self, answer: str, *, prefix: str = "hop") -> Reply:
        """POST a chat request whose canned answer is ``answer`` (``small``, ``large`` or
        ``burst&n=N``); return when the whole answer has arrived."""
        if self._transport is None or self._lost is not None:
            raise ConnectionError(f"the connection is closed: {self._lost}")
        self._request_id = f"{prefix}-{next(_ids)}"
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(
            (
                f"POST /v1/chat/completions?answer={answer} HTTP/1.1\r\nHost: hops\r\n"
                f"Content-Type: application/json\r\nX-Request-Id: {self._request_id}\r\n"
                f"Content-Length: {len(REQUEST_BODY)}\r\n\r\n"
            ).encode()
            + REQUEST_BODY
        )
        return await self._waiter

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._head is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length, released = 0, None
            for line in bytes(self._buffer[:end]).decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value)
                elif name == "x-released":
                    released = float(value)
            del self._buffer[: end + 4]
            self._head = (length, released)
        length, released = self._head
        if len(self._buffer) >= length and self._waiter is not None:
            done_at = time.monotonic()
            del self._buffer[:length]
            self._head = None
            if not self._waiter.done():
                self._waiter.set_result(Reply(self._request_id, length, done_at, released))

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionError("closed by the peer")
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError(f"the connection was lost: {self._lost}"))


async def timed(connection: Connection, answer: str) -> tuple[float, Reply]:
    """One request: seconds from sending it to its answer's last byte, and the reply."""
    began = time.perf_counter()
    reply = await connection.ask(answer)
    return time.perf_counter() - began, reply


async def burst(host: str, port: int, n: int) -> tuple[float, list[Reply]]:
    """``n`` requests on ``n`` connections, answered together: seconds from the upstream's release
    to the last answer's last byte here, and the replies."""
    connections = await asyncio.gather(*(Connection.open(host, port) for _ in range(n)))
    try:
        replies = await asyncio.gather(*(c.ask(f"burst&n={n}", prefix="burst") for c in connections))
    finally:
        for connection in connections:
            connection.close()
    released = [reply.released_at for reply in replies if reply.released_at is not None]
    if len(released) != n:
        raise RuntimeError(f"burst: {n - len(released)} of {n} answers had no X-Released header")
    return max(reply.done_at for reply in replies) - min(released), replies
