"""The link port's HTTP/1.1 server against raw sockets on this loop: how each request framing is
read, pipelined requests, ``Expect: 100-continue``, answers whole and in pieces, refused requests,
a failing handler, and a client that goes away.

The client here writes and reads exactly the bytes a test names, so framings a real client may
choose are each exercised on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Final

import pytest

from pytest_rollout_chaos.servers.faultlayer.downstream import ClientConnection, Reply, Request

WAIT_S: Final = 5.0


class Echo:
    """A handler that answers each request with its method, target, path and body; it notes each
    request, and can be told to hold, to fail, or to answer in pieces of unknown length."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.hold = False
        self.fail = False
        self.in_pieces = False
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, request: Request, reply: Reply) -> None:
        self.requests.append(request)
        self.started.set()
        if self.fail:
            raise ValueError("a bug in the handler")
        if self.hold:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        body = f"{request.method} {request.target} {request.path} ".encode() + request.body
        if self.in_pieces:
            await reply.start(200, [("Content-Type", "text/plain")], None)
            await reply.write(body[:5])
            await reply.end(body[5:])
            return
        await reply.send(200, [("Content-Type", "text/plain")], body)


@contextlib.asynccontextmanager
async def serving(handler: Echo) -> AsyncIterator[int]:
    connections: set[ClientConnection] = set()
    server = await asyncio.get_running_loop().create_server(
        lambda: ClientConnection(handler, connections), "127.0.0.1", 0
    )
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for connection in list(connections):
            connection.abort()
        await asyncio.wait_for(server.wait_closed(), timeout=WAIT_S)


@contextlib.asynccontextmanager
async def client(port: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()


async def answer(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    """One answer: its status line, headers (lower-cased names) and body, de-chunked."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=WAIT_S)
    status, *lines = head[:-4].decode().split("\r\n")
    pairs = (line.partition(":") for line in lines)
    headers = {name.strip().lower(): value.strip() for name, _, value in pairs}
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while size := int((await reader.readuntil(b"\r\n"))[:-2], 16):
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        await reader.readexactly(2)
        return status, headers, body
    return status, headers, await reader.readexactly(int(headers.get("content-length", "0")))


def post(target: str, body: bytes, *extra: str) -> bytes:
    head = [f"POST {target} HTTP/1.1", "Host: x", f"Content-Length: {len(body)}", *extra]
    return "\r\n".join(head).encode() + b"\r\n\r\n" + body


@pytest.mark.asyncio
async def test_pipelined_requests_are_answered_one_by_one_in_order() -> None:
    echo = Echo()
    async with serving(echo) as port, client(port) as (reader, writer):
        writer.write(post("/a%20b?q=1", b"one") + post("/second", b"two"))
        first, second = await answer(reader), await answer(reader)
    assert first[0] == "HTTP/1.1 200 OK"
    assert first[2] == b"POST /a%20b?q=1 /a b one", "raw target kept, path decoded, body whole"
    assert second[2] == b"POST /second /second two"


@pytest.mark.asyncio
async def test_a_chunked_request_body_arrives_whole_without_its_framing() -> None:
    echo = Echo()
    chunked = b"4\r\nwiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Trailer: t\r\n\r\n"
    head = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    async with serving(echo) as port, client(port) as (reader, writer):
        writer.write(head + chunked[:9])  # the body comes in two writes
        await asyncio.sleep(0.05)
        assert echo.requests == [], "a request is handled only once its body is whole"
        writer.write(chunked[9:])
        _, _, body = await answer(reader)
    assert body == b"POST /c /c wikipedia"
    assert "Transfer-Encoding" not in echo.requests[0].headers


@pytest.mark.asyncio
async def test_a_client_that_expects_100_continue_is_told_to_go_on() -> None:
    echo = Echo()
    async with serving(echo) as port, client(port) as (reader, writer):
        writer.write(b"POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=WAIT_S)
        writer.write(b"ok")
        _, _, body = await answer(reader)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert body == b"POST /e /e ok"


@pytest.mark.asyncio
async def test_an_answer_of_unknown_length_is_sent_chunked() -> None:
    echo = Echo()
    echo.in_pieces = True
    async with serving(echo) as port, client(port) as (reader, writer):
        writer.write(post("/p", b"body"))
        _, headers, body = await answer(reader)
        writer.write(post("/again", b""))  # the connection is kept for the next request
        _, _, again = await answer(reader)
    assert headers["transfer-encoding"] == "chunked"
    assert body == b"POST /p /p body"
    assert again == b"POST /again /again "


@pytest.mark.asyncio
async def test_a_head_request_gets_headers_and_no_body() -> None:
    echo = Echo()
    async with serving(echo) as port, client(port) as (reader, writer):
        writer.write(b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n" + post("/next", b"n"))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=WAIT_S)
        _, _, body = await answer(reader)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert body == b"POST /next /next n", "no body came between the HEAD answer and the next one"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "sent",
    [
        b"NOT A REQUEST\r\n\r\n",
        b"POST /x HTTP/1.1\r\nno colon here\r\n\r\n",
        b"POST /x HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
    ],
)
async def test_a_request_that_cannot_be_read_is_refused_400_and_the_connection_closed(sent: bytes) -> None:
    echo = Echo()
    async with serving(echo) as port, client(port) as (reader, writer):
        writer.write(sent)
        status, headers, _ = await answer(reader)
        rest = await asyncio.wait_for(reader.read(), timeout=WAIT_S)
    assert status == "HTTP/1.1 400 Bad Request"
    assert headers["connection"] == "close"
    assert rest == b"", "closed after the refusal"
    assert echo.requests == []


@pytest.mark.asyncio
async def test_a_failing_handler_answers_500_and_closes() -> None:
    echo = Echo()
    echo.fail = True
    async with serving(echo) as port, client(port) as (reader, writer):
        writer.write(post("/f", b""))
        status, headers, _ = await answer(reader)
        rest = await asyncio.wait_for(reader.read(), timeout=WAIT_S)
    assert status == "HTTP/1.1 500 Internal Server Error"
    assert headers["connection"] == "close"
    assert rest == b""


@pytest.mark.asyncio
async def test_a_client_that_goes_away_cancels_its_request() -> None:
    echo = Echo()
    echo.hold = True
    async with serving(echo) as port:
        async with client(port) as (_, writer):
            writer.write(post("/slow", b""))
            await asyncio.wait_for(echo.started.wait(), timeout=WAIT_S)
        await asyncio.wait_for(echo.cancelled.wait(), timeout=WAIT_S)


@pytest.mark.asyncio
async def test_connection_close_is_honoured_after_the_answer() -> None:
    echo = Echo()
    async with serving(echo) as port, client(port) as (reader, writer):
        writer.write(post("/last", b"", "Connection: close"))
        _, headers, body = await answer(reader)
        rest = await asyncio.wait_for(reader.read(), timeout=WAIT_S)
    assert headers["connection"] == "close"
    assert (body, rest) == (b"POST /last /last ", b"")


@pytest.mark.asyncio
async def test_a_body_larger_than_the_read_ahead_limit_arrives_whole() -> None:
    echo = Echo()
    big = b"x" * (6 * 1024 * 1024)
    async with serving(echo) as port, client(port) as (reader, writer):
        writer.write(post("/big", big))
        _, _, body = await answer(reader)
    assert body == b"POST /big /big " + big
