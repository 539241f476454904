"""The fault layer's upstream client against scripted servers on this loop: what goes out, how each
body framing is read, which connections are kept, and which failures are cuts.

Each server here answers with exactly the bytes a test gives it, so the framings a real server
may choose (a length, chunks, the end of the connection, no body) are each exercised on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from pytest_rollout_chaos.servers.faultlayer.upstream import UpstreamError, UpstreamPool

KEEPALIVE_S: Final = 2.0
WAIT_S: Final = 5.0


@dataclass
class Scripted:
    """A TCP server: each request it reads is answered by ``script(request_index)`` (raw bytes, or
    None to close the connection without answering); it notes each request and connection."""

    script: Callable[[int], bytes | None]
    close_after: bool = False  # close each connection once it has answered
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                answer = self.script(len(self.requests) - 1)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def scripted(
    script: Callable[[int], bytes | None], *, close_after: bool = False, tls: ssl.SSLContext | None = None
) -> AsyncIterator[Scripted]:
    server = Scripted(script, close_after)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=tls)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listener.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(listener.wait_closed(), timeout=WAIT_S)


def ok(body: bytes, *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}", *extra]
    return "\r\n".join(head).encode() + b"\r\n\r\n" + body


async def fetch(pool: UpstreamPool, method: str = "POST", body: bytes = b"{}") -> tuple[int, list[bytes]]:
    async with pool.exchange(method, "/x", [("Content-Type", "application/json")], body) as answer:
        pieces = []
        while piece := await answer.chunk():
            pieces.append(piece)
        return answer.status, pieces


# -- the request -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_request_goes_out_as_the_client_sent_it() -> None:
    async with scripted(lambda _index: ok(b"{}")) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        headers = [("X-Multi", "first"), ("Cookie", "a=1; b=2"), ("X-Multi", "second")]
        async with pool.exchange(
            "PATCH", "/v1/odd%20path?b=2&a=1", headers, b'{"keep":  "spacing"}'
        ) as answer:
            await answer.read()
        async with pool.exchange("POST", "/empty", [], b"") as answer:
            await answer.read()
        async with pool.exchange("GET", "/get", [], b"") as answer:
            await answer.read()
        await pool.close()
    patch, post, get = server.requests
    assert (
        patch
        == (
            f"PATCH /v1/odd%20path?b=2&a=1 HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            "X-Multi: first\r\nCookie: a=1; b=2\r\nX-Multi: second\r\nContent-Length: 20\r\n\r\n"
            '{"keep":  "spacing"}'
        ).encode()
    ), "no header the client did not send, none reordered"
    assert post.endswith(b"\r\nContent-Length: 0\r\n\r\n"), "a POST says its body is empty"
    assert b"Content-Length" not in get


# -- framings of the answer --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_length_framed_answer_comes_in_one_piece_and_its_connection_is_kept() -> None:
    async with scripted(lambda index: ok(b'{"n": %d}' % index)) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        answers = [await fetch(pool) for _ in range(3)]
        await pool.close()
    assert answers == [(200, [b'{"n": 0}']), (200, [b'{"n": 1}']), (200, [b'{"n": 2}'])]
    assert server.connections == 1


@pytest.mark.asyncio
async def test_a_chunked_answer_comes_chunk_by_chunk_and_its_end_is_seen_when_it_has_arrived() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked = head + b"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    async with scripted(lambda _index: chunked) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        async with pool.exchange("GET", "/", [], b"") as answer:
            first = await answer.chunk()
            second = await answer.chunk()
            # the last chunk came with the others: the end is known without waiting for more
            assert answer.at_eof()
            assert answer.content_length is None
        assert (first, second) == (b"hello", b" world")
        assert await fetch(pool, "GET") == (200, [b"hello", b" world"])
        await pool.close()
    assert server.connections == 1


@pytest.mark.asyncio
async def test_an_answer_ended_by_closing_is_read_to_the_close_and_its_connection_not_kept() -> None:
    answer = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end"
    async with scripted(lambda _index: answer, close_after=True) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        first = await fetch(pool, "GET")
        second = await fetch(pool, "GET")
        await pool.close()
    assert first == second == (200, [b"to the end"])
    assert server.connections == 2, "an answer that ends with its connection leaves nothing to keep"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"),
        ("GET", b"HTTP/1.1 204 No Content\r\n\r\n"),
        ("GET", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n"),
    ],
)
async def test_answers_without_a_body_have_none(method: str, answer: bytes) -> None:
    async with scripted(lambda _index: answer) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        async with pool.exchange(method, "/", [], b"") as got:
            assert got.at_eof()
            assert await got.read() == b""
        async with pool.exchange(method, "/", [], b"") as got:
            assert await got.read() == b""
        await pool.close()
    assert server.connections == 1


@pytest.mark.asyncio
async def test_an_interim_answer_is_skipped() -> None:
    async with scripted(lambda _index: b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"final")) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        assert await fetch(pool) == (200, [b"final"])
        await pool.close()


# -- kept connections --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_answer_left_half_read_closes_its_connection() -> None:
    big = b"x" * 300_000
    async with scripted(lambda _index: ok(big)) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        async with pool.exchange("GET", "/", [], b"") as answer:
            await answer.chunk()  # and walk away, as when the client goes
        status, pieces = await fetch(pool, "GET")
        await pool.close()
    assert (status, b"".join(pieces)) == (200, big), "the next request gets its own answer"
    assert server.connections >= 2, "the half-read connection was not handed on"


@pytest.mark.asyncio
@pytest.mark.parametrize(("method", "retried"), [("GET", True), ("PUT", True), ("POST", False)])
async def test_a_kept_connection_the_server_closed_is_retried_only_for_idempotent_methods(
    method: str, retried: bool
) -> None:
    # the server answers the first request, then closes the kept connection as the second arrives
    async with scripted(
        lambda index: ok(b"first") if index == 0 else (None if index == 1 else ok(b"again"))
    ) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        assert await fetch(pool, method) == (200, [b"first"])
        if retried:
            assert await fetch(pool, method) == (200, [b"again"])
        else:
            with pytest.raises(UpstreamError, match="closed"):
                await fetch(pool, method)
        await pool.close()
    assert len(server.requests) == (3 if retried else 2)


@pytest.mark.asyncio
async def test_an_idle_connection_is_dropped_after_its_keepalive() -> None:
    async with scripted(lambda _index: ok(b"{}")) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=0.2)
        await fetch(pool)
        await asyncio.sleep(0.4)
        await fetch(pool)
        await pool.close()
    assert server.connections == 2


# -- cuts --------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_refused_connection_is_a_cut() -> None:
    async with scripted(lambda _index: None) as server:
        port = server.port
    pool = UpstreamPool(f"http://127.0.0.1:{port}", keepalive_s=KEEPALIVE_S)
    with pytest.raises(UpstreamError, match="ConnectionRefusedError"):
        await fetch(pool)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("answer", "what"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort", "45 bytes short"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n", "bad header line"),
    ],
)
async def test_a_garbled_or_cut_answer_is_a_cut(answer: bytes, what: str) -> None:
    async with scripted(lambda _index: answer, close_after=True) as server:
        pool = UpstreamPool(f"http://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        with pytest.raises(UpstreamError, match=what):
            await fetch(pool, "GET")
        await pool.close()


# -- TLS ---------------------------------------------------------------------------------------------


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.mark.asyncio
async def test_an_https_upstream_is_verified_as_a_browser_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _self_signed(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    async with scripted(lambda _index: ok(b"secret"), tls=tls) as server:
        untrusting = UpstreamPool(f"https://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        with pytest.raises(UpstreamError, match="CERTIFICATE_VERIFY_FAILED"):
            await fetch(untrusting)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        trusting = UpstreamPool(f"https://127.0.0.1:{server.port}", keepalive_s=KEEPALIVE_S)
        assert await fetch(trusting) == (200, [b"secret"])
        await trusting.close()
