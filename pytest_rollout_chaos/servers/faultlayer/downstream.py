"""One link's side toward its clients: the HTTP/1.1 server a reverse proxy needs, and no more.

The mirror of ``upstream``: a general web framework spent about 60 us a request on objects a
proxy never uses (routing, request and response objects, header defaults), a third of all the
layer did. A connection reads one request at a time (RFC 9112): request line, headers, and a
body framed by ``Content-Length`` or chunked transfer coding (``Expect: 100-continue`` is
answered so such a client sends it); the handler gets a ``Request`` and answers through its
``Reply``, whole or piece by piece. Requests a client sent ahead (pipelined) wait their turn.
When the client goes away (or half-closes: it has given up) the handler's task is cancelled, so
whatever it waits on upstream is cancelled too. A request that cannot be read (a bad line or
header, a head over 1 MiB) is answered 400 and the connection closed; a handler that fails
answers 500 (or, if its answer had begun, loses its connection), and the failure is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final, cast

from multidict import CIMultiDict

from pytest_rollout_chaos.servers.faultlayer.http1 import HEAD_LIMIT, header_tokens, persists
from pytest_rollout_chaos.servers.writeflow import WriteFlow

_PAUSE_AT: Final = 4 * 1024 * 1024  # bytes sent ahead of the request in hand at which reading stops
_TEXT: Final = "text/plain; charset=utf-8"

logger = logging.getLogger(__name__)


class BadRequest(Exception):
    """The client sent something that is not an HTTP/1.1 request."""


@dataclass(slots=True)
class Request:
    """One request as the client sent it: ``target`` raw, ``path`` percent-decoded, body whole."""

    method: str
    target: str
    path: str
    version: str
    headers: CIMultiDict[str]
    body: bytes

    @property
    def content_type(self) -> str:
        value = self.headers.get("Content-Type", "")
        return value.partition(";")[0].strip().lower() or "application/octet-stream"

    @property
    def keep_alive(self) -> bool:
        return persists(self.version, self.headers)


Handler = Callable[[Request, "Reply"], Awaitable[None]]


class Reply:
    """How a handler answers: ``send`` a whole answer, or ``start``, ``write`` pieces, ``end``."""

    def __init__(self, connection: ClientConnection, request: Request) -> None:
        self._connection = connection
        self._head_only = request.method == "HEAD"
        self.keep_alive = request.keep_alive
        self.started = False
        self.finished = False
        self._chunked = False

    async def send(self, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> None:
        """The whole answer at once, with its ``Content-Length``."""
        head = self._head(status, headers, f"Content-Length: {len(body)}")
        self.finished = True
        await self._connection.send(head if self._head_only else head + body)

    async def start(
        self, status: int, headers: Iterable[tuple[str, str]], content_length: int | None
    ) -> None:
        """Send status and headers; the body follows with that length, or chunked if it is unknown."""
        self._chunked = content_length is None and not self._head_only
        framing = "Transfer-Encoding: chunked" if self._chunked else f"Content-Length: {content_length or 0}"
        await self._connection.send(self._head(status, headers, framing))

    async def write(self, data: bytes) -> None:
        if not data or self._head_only:
            return
        await self._connection.send(b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data)

    async def end(self, last: bytes = b"") -> None:
        if self._head_only:
            self.finished = True
            return
        if self._chunked:
            tail = (b"%x\r\n%b\r\n" % (len(last), last) if last else b"") + b"0\r\n\r\n"
        else:
            tail = last
        self.finished = True
        if tail:
            await self._connection.send(tail)

    def abort(self) -> None:
        """Drop the client's connection at once: it sees no answer, or a cut one."""
        self.keep_alive = False
        self._connection.abort()

    def _head(self, status: int, headers: Iterable[tuple[str, str]], framing: str) -> bytes:
        if self.started:
            raise RuntimeError("the answer's head was sent already")
        self.started = True
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines += [f"{name}: {value}" for name, value in headers]
        lines.append(framing)
        if not self.keep_alive:
            lines.append("Connection: close")
        return "\r\n".join(lines).encode("utf-8", "surrogateescape") + b"\r\n\r\n"


class ClientConnection(WriteFlow):
    """One client's connection: reads requests one at a time and runs the handler on each."""

    def __init__(self, handler: Handler, connections: set[ClientConnection]) -> None:
        self._handler = handler
        self._connections = connections
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._task: asyncio.Task[None] | None = None
        self._continued = False  # "100 Continue" sent for the request being read
        self._closed = False
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport; uvloop's do not subclass asyncio.Transport
        self._transport = cast(asyncio.Transport, transport)
        self._connections.add(self)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._task is None:
            self._next()
        elif len(self._buffer) > _PAUSE_AT and self._transport is not None and not self._paused:
            self._transport.pause_reading()  # requests sent ahead pile up: wait for this one
            self._paused = True

    def eof_received(self) -> bool:
        # A client that stops sending has given up (HTTP clients do not half-close to wait for
        # an answer): close, which cancels the request in hand, as the servers behind do.
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._connections.discard(self)
        if self._task is not None:
            self._task.cancel()  # the client went away: so does what its request started
        self._release_writers()

    async def send(self, data: bytes) -> None:
        if self._closed or self._transport is None:
            raise ConnectionResetError("the client closed the connection")
        self._transport.write(data)
        await self.drained()
        if self._closed:
            raise ConnectionResetError("the client closed the connection")

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _next(self) -> None:
        """Start the handler on the next whole request in the buffer, if one has arrived."""
        if self._paused and self._transport is not None:
            self._transport.resume_reading()
            self._paused = False
        try:
            request = self._read_request()
        except BadRequest as error:
            self._refuse(str(error))
            return
        if request is None:
            return
        reply = Reply(self, request)
        self._task = asyncio.get_running_loop().create_task(self._run(request, reply))

    async def _run(self, request: Request, reply: Reply) -> None:
        try:
            await self._handler(request, reply)
        except asyncio.CancelledError:
            self.abort()
            return
        except Exception:
            logger.exception("the link's handler failed on %s %s", request.method, request.target)
            if reply.started:
                self.abort()
                return
            reply.keep_alive = False
            with contextlib.suppress(ConnectionError):
                await reply.send(500, [("Content-Type", _TEXT)], b"Internal Server Error")
        finally:
            self._task = None
        if not reply.finished:
            self.abort()
        elif not reply.keep_alive:
            self.close()
        elif not self._closed:
            self._next()

    def _refuse(self, why: str) -> None:
        if self._transport is None:
            return
        body = why.encode("utf-8", "replace")
        head = (
            f"HTTP/1.1 400 Bad Request\r\nContent-Type: {_TEXT}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        self._transport.write(head.encode() + body)
        self._transport.close()

    def _read_request(self) -> Request | None:
        """The next request if it arrived whole (its bytes taken from the buffer), else None."""
        buffer = self._buffer
        while buffer.startswith(b"\r\n"):  # RFC 9112 2.2: empty lines before a request are ignored
            del buffer[:2]
        head_end = buffer.find(b"\r\n\r\n")
        if head_end < 0:
            if len(buffer) > HEAD_LIMIT:
                raise BadRequest(f"request line and headers longer than {HEAD_LIMIT} bytes")
            return None
        method, target, version, headers = _parse_head(bytes(buffer[:head_end]))
        body_start = head_end + 4
        if "chunked" in header_tokens(headers, "Transfer-Encoding"):
            dechunked = _dechunk(buffer, body_start)
            if dechunked is None:
                self._continue(headers)
                return None
            body, end = dechunked
            del headers["Transfer-Encoding"]
        else:
            length = _content_length(headers)
            end = body_start + length
            if len(buffer) < end:
                self._continue(headers)
                return None
            body = bytes(buffer[body_start:end])
        del buffer[:end]
        self._continued = False
        path = urllib.parse.unquote(target.partition("?")[0], errors="surrogateescape")
        return Request(method, target, path, version, headers, body)

    def _continue(self, headers: CIMultiDict[str]) -> None:
        if not self._continued and headers.get("Expect", "").lower() == "100-continue":
            self._continued = True
            if self._transport is not None:
                self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")


def _parse_head(head: bytes) -> tuple[str, str, str, CIMultiDict[str]]:
    lines = head.split(b"\r\n")
    parts = lines[0].decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/1."):
        raise BadRequest(f"not an HTTP/1.x request line: {lines[0][:60]!r}")
    method, target, version = parts
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines[1:]:
        name, colon, value = line.decode("utf-8", "surrogateescape").partition(":")
        if not colon or not name or name != name.strip():
            raise BadRequest(f"bad header line {line[:60]!r}")
        headers.add(name, value.strip())
    return method, target, version, headers


def _content_length(headers: CIMultiDict[str]) -> int:
    values = {value.strip() for value in headers.getall("Content-Length", [])}
    if not values:
        return 0
    if len(values) > 1 or not next(iter(values)).isdigit():
        raise BadRequest(f"bad Content-Length {headers.getall('Content-Length')!r}")
    return int(values.pop())


def _dechunk(buffer: bytearray, start: int) -> tuple[bytes, int] | None:
    """A chunked body that begins at ``start``, decoded, and where it ends; None if it has not all
    arrived. Trailers are read and dropped."""
    pieces = []
    at = start
    while True:
        line_end = buffer.find(b"\r\n", at)
        if line_end < 0:
            return None
        try:
            size = int(bytes(buffer[at:line_end]).split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise BadRequest(f"bad chunk size line {bytes(buffer[at:line_end][:40])!r}") from None
        at = line_end + 2
        if size == 0:
            break
        if len(buffer) < at + size + 2:
            return None
        if buffer[at + size : at + size + 2] != b"\r\n":
            raise BadRequest("a chunk of the request does not end with CRLF")
        pieces.append(bytes(buffer[at : at + size]))
        at += size + 2
    while True:  # trailers, up to the empty line
        line_end = buffer.find(b"\r\n", at)
        if line_end < 0:
            return None
        empty = line_end == at
        at = line_end + 2
        if empty:
            return b"".join(pieces), at
