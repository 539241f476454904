"""Frames between the fault layer's processes: calls answered by id, over one stream socket.

A frame is two lengths (big-endian, 4 bytes each), a JSON message and a blob of raw bytes (a
request body, passed on without being encoded again). A message with ``re`` answers the call
with that ``id``; any other message is a call of the other side, which the handler answers: at
once, in the order calls arrive (what keeps the coordinator's decisions in one order), or, when
it returns a coroutine, whenever that ends (a ``hang`` waiting for its release). Every call has
a deadline; when the other side goes away, every call waiting fails with ``ChannelClosedError``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, cast

from pytest_rollout_chaos import json_decode

CALL_TIMEOUT_S: Final = 30.0  # a decision never takes long: past this the other side is stuck
_LENGTHS: Final = struct.Struct(">II")

Message = dict[str, Any]
Handler = Callable[[Message, bytes], Message | Awaitable[Message]]

logger = logging.getLogger(__name__)


class ChannelClosedError(ConnectionError):
    """The other process of the layer went away (or stopped answering) while a call waited."""


class CallFailedError(RuntimeError):
    """The other process of the layer answered a call with its failure."""


def frame(message: Mapping[str, Any], blob: bytes = b"") -> bytes:
    head = json.dumps(message, separators=(",", ":")).encode()
    return _LENGTHS.pack(len(head), len(blob)) + head + blob


class Channel(asyncio.Protocol):
    """One end of the socket between two of the layer's processes.

    A protocol, not streams: a request through a worker waits on one call, and a call's cost
    (framing, a future, a deadline) is on every such request.
    """

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Message]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self.closed = False
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @classmethod
    async def over(cls, sock: socket.socket, handler: Handler) -> Channel:
        """A channel over a connected stream socket (one end of a socket pair)."""
        _, channel = await asyncio.get_running_loop().connect_accepted_socket(lambda: cls(handler), sock=sock)
        return channel

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start = 0
        while len(buffer) - start >= _LENGTHS.size:
            head, size = _LENGTHS.unpack_from(buffer, start)
            end = start + _LENGTHS.size + head + size
            if len(buffer) < end:
                break
            body = start + _LENGTHS.size
            self._receive(
                json_decode.loads(bytes(buffer[body : body + head])), bytes(buffer[body + head : end])
            )
            start = end
        del buffer[:start]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(ChannelClosedError("the layer's other process went away"))
        if not self.gone.done():
            self.gone.set_result(None)

    async def call(
        self, message: Mapping[str, Any], blob: bytes = b"", *, timeout_s: float | None = CALL_TIMEOUT_S
    ) -> Message:
        """Send a call and wait for its answer, at most ``timeout_s`` (None: until the other side goes)."""
        if self.closed or self._transport is None:
            raise ChannelClosedError("the layer's other process is gone")
        call_id = next(self._ids)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Message] = loop.create_future()
        self._waiting[call_id] = answer
        deadline = (
            None if timeout_s is None else loop.call_later(timeout_s, _expire, answer, message, timeout_s)
        )
        try:
            self._transport.write(frame({**message, "id": call_id}, blob))
            result = await answer
        finally:
            self._waiting.pop(call_id, None)
            if deadline is not None:
                deadline.cancel()
        if "error" in result:
            raise CallFailedError(f"{message.get('op')!r}: {result['error']}")
        return result

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _receive(self, message: Message, blob: bytes) -> None:
        if "re" in message:
            waiting = self._waiting.get(message["re"])
            if waiting is not None and not waiting.done():
                waiting.set_result(message)
            return
        try:
            answer = self._handler(message, blob)
        except Exception as error:  # answered, so the caller fails now rather than at its deadline
            logger.exception("fault layer call %r failed", message.get("op"))
            answer = {"error": f"{type(error).__name__}: {error}"}
        if isinstance(answer, dict):
            self._answer(message["id"], answer)
            return
        task = asyncio.ensure_future(self._answer_later(message["id"], answer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer_later(self, call_id: int, answer: Awaitable[Message]) -> None:
        try:
            result = await answer
        except Exception as error:  # answered, so the caller fails now rather than at its deadline
            logger.exception("fault layer call %s failed", call_id)
            result = {"error": f"{type(error).__name__}: {error}"}
        self._answer(call_id, result)

    def _answer(self, call_id: int, answer: Mapping[str, Any]) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(frame({**answer, "re": call_id}))


def _expire(answer: asyncio.Future[Message], message: Mapping[str, Any], timeout_s: float) -> None:
    if not answer.done():
        answer.set_exception(ChannelClosedError(f"no answer to {message.get('op')!r} within {timeout_s:g}s"))
