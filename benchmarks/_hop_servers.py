"""The two programs the hop benchmark puts at the ends of its paths, each a process of its own.

    python -m benchmarks._hop_servers upstream          # canned vLLM-like logprob answers
    python -m benchmarks._hop_servers splice PORT       # the Python floor: a bare relay to PORT

``upstream`` answers every request with one of two canned chat/completions answers carrying
per-token logprobs, as vLLM answers with ``logprobs`` and ``return_tokens_as_token_ids``
(``?answer=small`` about 5 KB, ``large`` about 256 KB), or, for ``?answer=burst&n=N``, holds
each request until N are waiting and then writes all N large answers at once, the release time
(``time.monotonic()``, one clock for every process) in an ``X-Released`` header. It parses only
the framing: it must cost the same on every path, and little.

``splice`` is the least a Python relay can do: uvloop, bytes from each socket written to its
peer as they arrive, no parsing, no recording. What the fault layer costs above it is the
layer's own work.

Both report their port to the supervisor as every server of the harness does.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
import time
import urllib.parse
from typing import Any, Final, cast

from pytest_rollout_chaos.servers.serve import die_with_parent, write_ready_file

SMALL_BYTES: Final = 5 * 1024
LARGE_BYTES: Final = 256 * 1024
_HIGH_WATER: Final = 1024 * 1024  # a peer's unsent bytes at which the splice stops reading


def logprob_answer(tokens: int) -> dict[str, Any]:
    """A chat/completions answer generating ``tokens`` ids, each with its logprob (deterministic)."""
    ids = [(index * 7919 + 13) % 32_000 for index in range(tokens)]
    logprobs = [-round(((index * 37) % 1000) / 997 + 0.0001, 4) for index in range(tokens)]
    content = [
        {
            "token": f"token_id:{token}",
            "logprob": logprob,
            "bytes": [32, 97 + token % 26, 98 + token % 24],
            "top_logprobs": [{"token": f"token_id:{token}", "logprob": logprob, "bytes": [32, 97]}],
        }
        for token, logprob in zip(ids, logprobs, strict=True)
    ]
    return {
        "id": "chatcmpl-hops",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "hops",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": " ab" * tokens, "tool_calls": []},
                "logprobs": {"content": content},
                "finish_reason": "length",
                "stop_reason": None,
            }
        ],
        "usage": {"prompt_tokens": 64, "total_tokens": 64 + tokens, "completion_tokens": tokens},
        "prompt_logprobs": None,
    }


def answer_of_size(size: int) -> dict[str, Any]:
    """A ``logprob_answer`` with as many tokens as keep its body (``encode``) near ``size`` bytes."""
    base = len(encode(logprob_answer(0)))
    per_token = (len(encode(logprob_answer(100))) - base) / 100
    return logprob_answer(max(1, round((size - base) / per_token)))


def encode(document: dict[str, Any]) -> bytes:
    """Compact JSON, as vLLM's server writes it."""
    return json.dumps(document, separators=(",", ":")).encode()


SIZES: Final = {"small": SMALL_BYTES, "large": LARGE_BYTES}


def _head(body: bytes, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    ).encode()


class _Upstream(asyncio.Protocol):
    """One client connection of the canned upstream: read a request's framing, answer it."""

    def __init__(self, answers: dict[str, bytes], waiting: list[tuple[asyncio.Transport, int]]) -> None:
        self._answers = answers
        self._waiting = waiting
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (end := self._buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(self._buffer[:end]).decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self._buffer) < end + 4 + length:
                return
            del self._buffer[: end + 4 + length]
            self._answer(head.split(" ")[1])

    def _answer(self, target: str) -> None:
        assert self._transport is not None
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
        kind = query.get("answer", ["small"])[0]
        if kind != "burst":
            body = self._answers[kind]
            self._transport.write(_head(body) + body)
            return
        self._waiting.append((self._transport, int(query.get("n", ["1"])[0])))
        if len(self._waiting) >= self._waiting[0][1]:
            released, body = time.monotonic(), self._answers["large"]
            head = _head(body, f"X-Released: {released!r}\r\n")
            for transport, _ in self._waiting:
                transport.write(head + body)
            self._waiting.clear()


class _Splice(asyncio.Protocol):
    """One side of a spliced pair: what arrives is written to the peer; a full peer pauses us."""

    def __init__(self) -> None:
        self.peer: _Splice | None = None
        self.transport: asyncio.Transport | None = None
        self._early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=_HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        if self.peer is None or self.peer.transport is None:
            self._early.append(data)
        else:
            self.peer.transport.write(data)

    def joined(self, peer: _Splice) -> None:
        self.peer = peer
        assert peer.transport is not None
        for data in self._early:
            peer.transport.write(data)
        self._early.clear()

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def eof_received(self) -> bool:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


async def _splice_to(upstream_port: int, client: _Splice) -> None:
    loop = asyncio.get_running_loop()
    try:
        _, server_side = await loop.create_connection(_Splice, "127.0.0.1", upstream_port)
    except OSError:
        if client.transport is not None:
            client.transport.abort()
        return
    server_side.peer = client
    client.joined(server_side)
    server_side.joined(client)


async def _serve(program: str, args: list[str]) -> None:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    if program == "upstream":
        answers = {name: encode(answer_of_size(size)) for name, size in SIZES.items()}
        waiting: list[tuple[asyncio.Transport, int]] = []
        server = await loop.create_server(lambda: _Upstream(answers, waiting), sock=sock, backlog=1024)
    else:
        upstream_port = int(args[0])
        tasks: set[asyncio.Task[None]] = set()

        def accept() -> _Splice:
            side = _Splice()
            # the upstream connection is opened once the client's is made (the next turn)
            task = loop.create_task(_splice_to(upstream_port, side))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            return side

        server = await loop.create_server(accept, sock=sock, backlog=1024)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    write_ready_file("127.0.0.1", int(sock.getsockname()[1]))
    async with server:
        await stop.wait()


def main(argv: list[str]) -> None:
    die_with_parent()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve(argv[0], argv[1:]))
    else:
        uvloop.run(_serve(argv[0], argv[1:]))


if __name__ == "__main__":
    main(sys.argv[1:])
