"""One link's connections to its upstream: a keep-alive pool, and the HTTP/1.1 exchange on them.

The layer only passes requests and answers on, so it speaks just what a reverse proxy needs of
HTTP/1.1 (RFC 9112) rather than going through a general client: aiohttp's client spent about
120 us a request building objects the layer never used (cookie jars, default headers, traces,
timers), as much as all the rest the layer did. The request goes out as the client sent it:
its method and target, its headers less the hop-by-hop ones (the caller's choice) plus ``Host``
(the upstream's) and the body's ``Content-Length``, and no header the client did not send. The
answer's status line and headers are read whole; its body is framed by chunked transfer coding,
``Content-Length``, or the end of the connection, and read piece by piece as it arrives (after
HEAD, 1xx, 204 and 304 there is none; interim 1xx answers are skipped).

Each connection carries one request at a time. It goes back to the pool only once its answer
was read to the end and neither side asked to close; a connection left half-read (a client that
went away, a cut) is closed. An idle connection is dropped after ``keepalive_s`` or as soon as
its server closes it. A request on a reused connection that the server had closed meanwhile,
before any byte of an answer came back, is sent once more on a new connection when its method is
idempotent (RFC 9112 9.3.1, as aiohttp does); otherwise, and whenever the upstream refuses,
drops or garbles a connection, ``UpstreamError`` says what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterable
from typing import Final, cast

from multidict import CIMultiDict

from pytest_rollout_chaos.servers.faultlayer.http1 import HEAD_LIMIT, header_tokens, persists
from pytest_rollout_chaos.servers.writeflow import WriteFlow

READ_SIZE: Final = 256 * 1024  # the most one piece of a body passed on holds
_PAUSE_AT: Final = 4 * 1024 * 1024  # unread bytes at which the connection stops reading
_NO_BODY_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})  # no Content-Length: 0
_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


class UpstreamError(Exception):
    """The upstream refused, dropped or garbled the connection; no answer came whole."""


class _Connection(WriteFlow):
    """One TCP (or TLS) connection: what arrived and is not read yet, and whether it ended."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.ended = False  # the server closed its side, or the connection is gone
        self.error: BaseException | None = None
        self.answered = False  # a byte of an answer came back on it (since it was last idle)
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport; uvloop's (the layer runs on uvloop) do not subclass asyncio.Transport
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.answered = True
        self.buffer += data
        if len(self.buffer) > _PAUSE_AT and self.transport is not None:
            self.transport.pause_reading()
            self._paused = True
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.error = exc
        self._wake()
        self._release_writers()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    @property
    def usable(self) -> bool:
        """Idle, open, and nothing unasked-for arrived on it."""
        return (
            not self.ended
            and not self.buffer
            and self.transport is not None
            and not self.transport.is_closing()
        )

    async def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)
        await self.drained()
        if self.ended and self.error is not None:
            raise UpstreamError(f"the connection broke while sending: {self.error}")

    async def more(self) -> None:
        """Wait until more bytes arrive, or raise when the connection has ended."""
        if self.ended:
            raise UpstreamError(f"the connection closed{f': {self.error}' if self.error else ''}")
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def take(self, count: int) -> bytes:
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        if self._paused and len(self.buffer) < _PAUSE_AT // 2 and self.transport is not None:
            self.transport.resume_reading()
            self._paused = False
        return data

    async def read_line(self, limit: int = HEAD_LIMIT) -> bytes:
        """Up to and without the next CRLF."""
        start = 0
        while (end := self.buffer.find(b"\r\n", start)) < 0:
            if len(self.buffer) > limit:
                raise UpstreamError(f"a line of the answer is longer than {limit} bytes")
            start = max(len(self.buffer) - 1, 0)
            await self.more()
        line = self.take(end + 2)
        return line[:-2]

    async def read_exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            await self.more()
        return self.take(count)

    async def read_some(self, most: int) -> bytes:
        """What has arrived (at least one byte), at most ``most``; b"" once the connection ended."""
        while not self.buffer:
            if self.ended:
                return b""
            await self.more()
        return self.take(min(most, len(self.buffer)))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Answer:
    """The upstream's answer: status and headers read, the body read piece by piece."""

    def __init__(
        self,
        connection: _Connection,
        status: int,
        headers: CIMultiDict[str],
        *,
        framing: str,
        keep_alive: bool,
    ) -> None:
        self.status = status
        self.headers = headers
        self._connection = connection
        self._framing = framing  # "none", "length", "chunked" or "close"
        self._left = int(headers.get("Content-Length", "0")) if framing == "length" else 0
        self._done = framing == "none" or (framing == "length" and self._left == 0)
        self.reusable = keep_alive and framing != "close"

    @property
    def content_type(self) -> str:
        value = self.headers.get("Content-Type", "")
        return value.partition(";")[0].strip().lower() or "application/octet-stream"

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("Content-Length")
        return int(value) if self._framing == "length" and value is not None else None

    def at_eof(self) -> bool:
        """Has the whole body been read? (A chunked body's end is taken now if it has arrived.)"""
        if not self._done and self._framing == "chunked" and self._connection.buffer.startswith(b"0\r\n"):
            end = self._connection.buffer.find(b"\r\n\r\n", 1)  # the last chunk, trailers and all
            if end >= 0:
                self._connection.take(end + 4)
                self._done = True
        return self._done

    async def chunk(self) -> bytes:
        """The next piece of the body as it arrived; b"" at its end."""
        if self._done:
            return b""
        connection = self._connection
        if self._framing == "length":
            data = await connection.read_some(min(self._left, READ_SIZE))
            if not data:
                raise UpstreamError(f"the connection closed {self._left} bytes short of the answer's end")
            self._left -= len(data)
            self._done = self._left == 0
            return data
        if self._framing == "close":
            data = await connection.read_some(READ_SIZE)
            self._done = not data
            return data
        line = await connection.read_line()
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise UpstreamError(f"bad chunk size line {bytes(line[:40])!r}") from None
        if size == 0:
            while await connection.read_line():  # trailers, up to the empty line
                pass
            self._done = True
            return b""
        data = await connection.read_exactly(size)
        if await connection.read_exactly(2) != b"\r\n":
            raise UpstreamError("a chunk of the answer does not end with CRLF")
        return data

    async def read(self) -> bytes:
        pieces = []
        while piece := await self.chunk():
            pieces.append(piece)
        return b"".join(pieces)


class UpstreamPool:
    """Keep-alive connections to one upstream (``http://host:port`` or ``https://...``)."""

    def __init__(self, url: str, *, keepalive_s: float) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream: expected http(s)://host:port, got {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        default = (parts.scheme == "https" and self.port == 443) or (
            parts.scheme == "http" and self.port == 80
        )
        self.host_header = parts.netloc.rpartition("@")[2] if not default else self.host
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._keepalive_s = keepalive_s
        self._idle: list[_Connection] = []
        self._prune: asyncio.TimerHandle | None = None

    @contextlib.asynccontextmanager
    async def exchange(
        self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> AsyncIterator[Answer]:
        """Send one request; yield its answer, headers read. The connection goes back to the pool
        if the answer was read to its end, and is closed otherwise."""
        request = self._request(method, target, headers, body)
        connection, reused = await self._acquire()
        try:
            try:
                answer = await self._send(connection, request, method)
            except UpstreamError:
                # a kept connection the server closed just as it was reused: nothing was answered
                if not reused or connection.answered or method not in _IDEMPOTENT:
                    raise
                connection.close()
                connection = await self._connect()
                answer = await self._send(connection, request, method)
        except BaseException:
            connection.close()
            raise
        try:
            yield answer
        finally:
            if answer.reusable and answer.at_eof() and connection.usable:
                self._release(connection)
            else:
                connection.close()

    async def close(self) -> None:
        if self._prune is not None:
            self._prune.cancel()
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    def _request(self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        lines += [f"{name}: {value}" for name, value in headers]
        if body or method not in _NO_BODY_METHODS:
            lines.append(f"Content-Length: {len(body)}")
        return "\r\n".join(lines).encode("utf-8", "surrogateescape") + b"\r\n\r\n" + body

    async def _acquire(self) -> tuple[_Connection, bool]:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if connection.usable and now - connection.idle_since < self._keepalive_s:
                return connection, True
            connection.close()
        return await self._connect(), False

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                _Connection,
                self.host,
                self.port,
                ssl=self._ssl,
                server_hostname=self.host if self._ssl else None,
            )
        except OSError as error:  # refused, unreachable, TLS failed (ssl.SSLError is an OSError)
            raise UpstreamError(f"{type(error).__name__}: {error}") from None
        return connection

    async def _send(self, connection: _Connection, request: bytes, method: str) -> Answer:
        await connection.send(request)
        while True:
            status_line = await connection.read_line()
            version, _, rest = status_line.decode("latin-1").partition(" ")
            code, _, _reason = rest.partition(" ")
            if not version.startswith("HTTP/1.") or not code.isdigit():
                raise UpstreamError(f"not an HTTP/1.x status line: {status_line[:60]!r}")
            headers: CIMultiDict[str] = CIMultiDict()
            while line := await connection.read_line():
                name, colon, value = line.decode("utf-8", "surrogateescape").partition(":")
                if not colon or not name or name != name.strip():
                    raise UpstreamError(f"bad header line {line[:60]!r}")
                headers.add(name, value.strip())
            status = int(code)
            if 100 <= status < 200 and status != 101:  # interim: the final answer follows
                continue
            # 101: switched to another protocol, not HTTP any more
            keep_alive = status != 101 and persists(version, headers)
            framing = _framing(method, status, headers)
            return Answer(connection, status, headers, framing=framing, keep_alive=keep_alive)

    def _release(self, connection: _Connection) -> None:
        connection.idle_since = time.monotonic()
        connection.answered = False
        self._idle.append(connection)
        if self._prune is None:
            self._prune = asyncio.get_running_loop().call_later(self._keepalive_s, self._drop_stale)

    def _drop_stale(self) -> None:
        """Close idle connections past their keep-alive or closed by the server."""
        self._prune = None
        now = time.monotonic()
        keep = []
        for connection in self._idle:
            if connection.usable and now - connection.idle_since < self._keepalive_s:
                keep.append(connection)
            else:
                connection.close()
        self._idle = keep
        if keep:
            self._prune = asyncio.get_running_loop().call_later(self._keepalive_s, self._drop_stale)


def _framing(method: str, status: int, headers: CIMultiDict[str]) -> str:
    """How the answer's body ends (RFC 9112 6.3)."""
    if method == "HEAD" or status < 200 or status in (204, 304):
        return "none"
    if "chunked" in header_tokens(headers, "Transfer-Encoding"):
        return "chunked"
    length = headers.get("Content-Length")
    if length is not None:
        if not length.strip().isdigit():
            raise UpstreamError(f"bad Content-Length {length!r}")
        return "length"
    return "close"
