"""The Gym helper of a real ``NemoGym`` Ray actor: its ``run_examples`` served by this process.

A Ray actor runs in its own worker process, but the Gym client a collection must use
(``ctx.gym``: the one the ``short_results`` fault arms, that records every ``/run`` into this
History and refuses work once the collection is over) lives here, on the collection's event
loop. ``GymRelay`` serves that client's ``run_examples`` over loopback HTTP for as long as one
collection runs; ``RelayHelper`` is what the actor holds as its ``RolloutCollectionHelper``
(``rch``): a small picklable object whose ``run_examples`` asks the relay.

The contract is NeMo Gym's and stays lazy as it is here: ``run_examples`` returns an iterator,
each ``next()`` asks for the next awaitable (one short blocking round trip, as the client only
starts requests then), and awaiting one waits, without a deadline (NeMo Gym's has none), for
that ``(row, result)``. Rows go as JSON (the Gym client sends them as JSON anyway); answers
come back pickled, exceptions included, so the actor raises what the client raised.

Where NeMo Gym's own client runs in the actor (``nemo_rl_gym``), only ``begin`` is asked: each of
its ``run_examples`` calls is recorded here, and learns here how many results go on (the
``short_results`` fault armed on this process's Gym client acts on it so).
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import pickle
import socket
import traceback
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any, Final

from pytest_rollout_chaos.errors import ChaosError, CollectorTargetError

HOST: Final = "127.0.0.1"
SHUTDOWN_S: Final = 1.0
"""How long closing the relay waits for answers still being written (the actor is dead by then)."""


class RelayError(ChaosError):
    """The relay could not answer: the collection it served is over, or it failed itself."""


class GymRelay:
    """``helper.run_examples`` and ``helper.begin`` (a ``GymHelper`` over ``ctx.gym``) served to the
    actor's process."""

    def __init__(self, helper: Any) -> None:
        self._helper = helper
        self._iterators: dict[int, Iterator[Awaitable[Any]]] = {}
        self._awaitables: dict[int, Awaitable[Any]] = {}
        self._ids = itertools.count()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[RelayHelper]:
        """Serve on a loopback port until the block ends; yield the helper that reaches it."""
        from aiohttp import web

        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/run_examples", self._run_examples)
        app.router.add_post("/next", self._next)
        app.router.add_post("/await", self._await)
        app.router.add_post("/begin", self._begin)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=SHUTDOWN_S)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((HOST, 0))
            await web.SockSite(runner, sock).start()
            yield RelayHelper(f"http://{HOST}:{sock.getsockname()[1]}")
        finally:
            for awaitable in self._awaitables.values():
                if inspect.iscoroutine(awaitable):  # handed out, never awaited: the actor is gone
                    awaitable.close()
            self._iterators.clear()
            self._awaitables.clear()
            await runner.cleanup()
            sock.close()

    async def _run_examples(self, request: Any) -> Any:
        examples = (await request.json())["examples"]
        try:
            iterator = iter(self._helper.run_examples(examples))
        except Exception as error:
            return _reply(False, error)
        number = next(self._ids)
        self._iterators[number] = iterator
        return _reply(True, number)

    async def _next(self, request: Any) -> Any:
        iterator = self._iterators.get(int((await request.json())["batch"]))
        if iterator is None:
            return _reply(False, RelayError("run_examples asked for more results after its collection ended"))
        try:
            awaitable = next(iterator, None)
        except Exception as error:
            return _reply(False, error)
        if awaitable is None:
            return _reply(True, None)
        number = next(self._ids)
        self._awaitables[number] = awaitable
        return _reply(True, number)

    async def _begin(self, request: Any) -> Any:
        try:
            return _reply(True, self._helper.begin(int((await request.json())["rows"])))
        except Exception as error:
            return _reply(False, error)

    async def _await(self, request: Any) -> Any:
        awaitable = self._awaitables.pop(int((await request.json())["awaitable"]), None)
        if awaitable is None:
            return _reply(False, RelayError("this result was awaited already or its collection ended"))
        try:
            value = await awaitable
        except Exception as error:
            return _reply(False, error)
        return _reply(True, value)


def _reply(ok: bool, value: Any) -> Any:
    """``(ok, value)`` pickled; an exception that cannot cross becomes a ``RelayError`` with its
    text and traceback, so the actor still raises what went wrong."""
    from aiohttp import web

    try:
        body = pickle.dumps((ok, value))
        pickle.loads(body)  # an exception whose __init__ takes other arguments fails only here
    except Exception as error:
        shown = (
            "".join(traceback.format_exception(value)) if isinstance(value, BaseException) else repr(value)
        )
        body = pickle.dumps((False, RelayError(f"could not send the answer ({error}): {shown}")))
    return web.Response(body=body, content_type="application/octet-stream")


class RelayHelper:
    """The actor's ``rch``: NeMo Gym's ``RolloutCollectionHelper.run_examples``, through the relay."""

    def __init__(self, url: str) -> None:
        self.url = url

    def run_examples(
        self, examples: list[dict[str, Any]], head_server_config: Any = None, semaphore: Any = None
    ) -> Iterator[Awaitable[Any]]:
        if semaphore is not None:  # the Gym client takes none; GymHelper says so in the same words
            raise CollectorTargetError("NeMo RL passed run_examples a semaphore; the Gym client takes none")
        batch = self._call("/run_examples", {"examples": examples})
        return self._results(batch)

    def begin(self, rows: int) -> int:
        """``GymHelper.begin`` of this process: NeMo Gym's own client in the actor records each call
        here and learns how many results go on (``own_gym.OwnGym``)."""
        return int(self._call("/begin", {"rows": rows}))

    def _results(self, batch: int) -> Iterator[Awaitable[Any]]:
        while True:
            number = self._call("/next", {"batch": batch})
            if number is None:
                return
            yield self._await(number)

    def _call(self, path: str, body: dict[str, Any]) -> Any:
        """A blocking round trip: the relay only starts requests or hands out awaitables here."""
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return _unpack(response.read())

    async def _await(self, number: int) -> Any:
        import aiohttp

        # No deadline: NeMo Gym's own wait for a result has none (a frozen agent hangs the actor).
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout()) as session,
            session.post(self.url + "/await", json={"awaitable": number}) as response,
        ):
            return _unpack(await response.read())


def _unpack(body: bytes) -> Any:
    ok, value = pickle.loads(body)
    if not ok:
        raise value
    return value
