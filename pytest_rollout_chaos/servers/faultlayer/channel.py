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
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

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


class Channel:
    """One end of the socket between two of the layer's processes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler) -> None:
        self._reader, self._writer, self._handler = reader, writer, handler
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Message]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    async def call(
        self, message: Mapping[str, Any], blob: bytes = b"", *, timeout_s: float | None = CALL_TIMEOUT_S
    ) -> Message:
        """Send a call and wait for its answer, at most ``timeout_s`` (None: until the other side goes)."""
        if self.closed:
            raise ChannelClosedError("the layer's other process is gone")
        call_id = next(self._ids)
        answer: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = answer
        try:
            self._writer.write(frame({**message, "id": call_id}, blob))
            result = await asyncio.wait_for(answer, timeout=timeout_s)
        except TimeoutError:
            raise ChannelClosedError(f"no answer to {message.get('op')!r} within {timeout_s}s") from None
        finally:
            self._waiting.pop(call_id, None)
        if "error" in result:
            raise CallFailedError(f"{message.get('op')!r}: {result['error']}")
        return result

    async def serve(self) -> None:
        """Read frames until the other side goes away; then fail every call still waiting."""
        try:
            while True:
                lengths = await self._reader.readexactly(_LENGTHS.size)
                head, size = _LENGTHS.unpack(lengths)
                data = await self._reader.readexactly(head + size)
                self._receive(json_decode.loads(data[:head]), data[head:])
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed = True
            for waiting in self._waiting.values():
                if not waiting.done():
                    waiting.set_exception(ChannelClosedError("the layer's other process went away"))

    def close(self) -> None:
        self._writer.close()

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
        if not self._writer.is_closing():
            self._writer.write(frame({**answer, "re": call_id}))
