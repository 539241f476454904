"""Naming what went wrong: root causes for aborted rollouts, and which errors mean "unreachable".

A trajectory's exception becomes an aborted Rollout whose ``error`` is the root cause, so the
text must never be a bare ``CancelledError``; an unreachable server is an infrastructure
failure, told apart here from a trajectory that failed on a server that answered. The
``root_cause_visible`` invariant walks cause chains with its own ``invariants.rules.chain``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

_UNREACHABLE_WORDS = (
    "cannot connect",
    "connection refused",
    "disconnected",
    "connection reset",
    "unreachable",
)


def chain(error: BaseException) -> Iterator[BaseException]:
    """``error``, then its causes and contexts, each once."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def root_cause(error: BaseException) -> str:
    """One line naming the deepest informative error and the outer one when they differ."""
    links = [link for link in chain(error) if not isinstance(link, asyncio.CancelledError)]
    if not links:
        return "cancelled (CancelledError) with no underlying error; the trajectory was cut by its caller"
    outer, inner = links[0], links[-1]
    text = _one(outer)
    if inner is not outer:
        text += f" (caused by {_one(inner)})"
    return text


def is_unreachable(error: BaseException) -> bool:
    """True when no server answered at all: connection refused, reset or dropped."""
    for link in chain(error):
        if isinstance(link, ConnectionRefusedError | ConnectionResetError):
            return True
        name = type(link).__name__
        if name in ("ClientConnectorError", "ServerDisconnectedError", "ClientOSError"):
            return True
        status = getattr(link, "status", 0)
        if status is None and any(word in str(link).lower() for word in _UNREACHABLE_WORDS):
            return True
    return False


def _one(error: BaseException) -> str:
    message = str(error).strip()
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


async def all_or_first_error(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """Await all; on the first failure cancel the rest and raise that failure itself.

    A TaskGroup, so no sibling keeps running detached; unwrapped, so the caller sees the root
    cause rather than an ExceptionGroup (or the CancelledErrors of the siblings).
    """

    async def wrapped(awaitable: Awaitable[T]) -> T:
        return await awaitable

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(wrapped(awaitable)) for awaitable in awaitables]
    except BaseExceptionGroup as failures:
        for error in failures.exceptions:
            if not isinstance(error, asyncio.CancelledError):
                raise error from failures
        raise
    return [task.result() for task in tasks]
