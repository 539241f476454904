"""The fault layer on several cores: worker processes that relay, one state that decides.

With ``--processes N`` the layer is its main process (the control API, the one ``LayerState``,
and a listener on every link like any worker) and ``N - 1`` worker processes. Every link's port
is bound with ``SO_REUSEPORT`` by each process, so the kernel spreads the clients' connections
over them. A worker does what costs: it reads and writes the bytes of both sides, decodes the
request and the answer, rewrites and records them (into its own events file, which the History
follows beside the main one). What a request needs to know that other requests change, it asks
the main process over its socket (``channel``), where ``LayerState`` answers as it does for its
own requests: the request's row and the rules that fire on it on arrival, what an answer teaches
before it leaves (a row's cookies and texts, the generations a ``prefix_drift`` rule watches), a
``prefix_drift`` rule's memory, a ``hang``'s release.

Why not the two simpler designs. Links spread over processes would keep a rule's state in one
process only if nothing spanned links, but rules count candidates per server across its links
(``collector->policy`` and ``model->policy``) and the row index ties a request on one link to a
cookie or answer seen on another. Several listeners each with their own state would count a
rule's ``nth``/``every``/``count`` per process. So the main process decides every request, in
the order the requests reach it, and the decisions are the same as with one process: only the
order of requests arriving at once on different processes is the kernel's, as it already was
the network's. The cost is one small call per request (two when its answer teaches a row or a
``prefix_drift`` rule watches its route), which the main process answers at once without any
JSON of the answer. While the state is quiet (no rule armed, no row known) a request without
``_rowidx`` has no row and no rule counts it, so a worker decides it alone; the main process
tells every worker when that changes, and the routes ``prefix_drift`` rules watch, and waits
until each knows before it answers the call that changed it (an arm, a reset) or lets the
request that changed it go on: whatever follows it, on any process, is decided knowing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos import json_decode
from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers.faultlayer.channel import Channel, Message
from pytest_rollout_chaos.servers.faultlayer.spec import MODULE, worker_events_file
from pytest_rollout_chaos.servers.faultlayer.state import LayerState, Link, Summary

START_TIMEOUT_S: Final = 30.0  # a worker imports the layer's modules and says hello
STOP_TIMEOUT_S: Final = 5.0  # SIGTERM, then SIGKILL
WORKER_MODULE: Final = f"{MODULE}.worker"

logger = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class _Worker:
    process: asyncio.subprocess.Process
    channel: Channel
    watching: asyncio.Future[None]


class Workers:
    """The layer's worker processes, seen from its main process: start, tell, answer, stop."""

    def __init__(self, state: LayerState, count: int) -> None:
        self.state, self.count = state, count
        self._workers: list[_Worker] = []
        state.on_change = self.tell

    async def start(self) -> None:
        """Start every worker and wait (bounded) until each has said hello; stop them on failure."""
        events = os.environ.get(EVENTS_FILE_ENV)
        try:
            for index in range(1, self.count + 1):
                env = dict(os.environ)
                if events:
                    env[EVENTS_FILE_ENV] = str(worker_events_file(Path(events), index))
                self._workers.append(await self._spawn(env))
            async with asyncio.timeout(START_TIMEOUT_S):
                await asyncio.gather(*(worker.channel.call({"op": "hello"}) for worker in self._workers))
        except BaseException:
            await self.stop()
            raise

    async def add_link(self, link: Link) -> None:
        """Every worker listens on the link's port too, before the link is answered as open."""
        body = {"op": "link", **dataclasses.asdict(link)}
        await asyncio.gather(*(worker.channel.call(body) for worker in self._workers))

    async def tell(self, summary: Summary) -> None:
        """Every worker learns the state's summary, so it knows when it need not ask."""
        live = [worker for worker in self._workers if not worker.channel.closed]
        quiet, watched = summary
        message = {"op": "summary", "quiet": quiet, "watched": watched}
        calls = (worker.channel.call(message) for worker in live)
        for worker, outcome in zip(live, await asyncio.gather(*calls, return_exceptions=True), strict=True):
            if isinstance(outcome, BaseException):  # gone: its listeners went with it
                logger.error("fault layer worker %d not told: %s", worker.process.pid, outcome)

    async def stop(self) -> None:
        """SIGTERM every worker, wait (bounded), SIGKILL what is left."""
        for worker in self._workers:
            with contextlib.suppress(ProcessLookupError):
                worker.process.terminate()
        for worker in self._workers:
            try:
                await asyncio.wait_for(worker.process.wait(), timeout=STOP_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.kill()
                await worker.process.wait()
            worker.channel.close()
            worker.watching.cancel()
        self._workers.clear()

    async def _spawn(self, env: dict[str, str]) -> _Worker:
        mine, theirs = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                WORKER_MODULE,
                "--fd",
                str(theirs.fileno()),
                pass_fds=(theirs.fileno(),),
                env=env,
            )
        finally:
            theirs.close()
        channel = await Channel.over(mine, self._answer)
        watching = asyncio.ensure_future(self._watch(channel, process))
        return _Worker(process, channel, watching)

    async def _watch(self, channel: Channel, process: asyncio.subprocess.Process) -> None:
        await channel.gone
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), timeout=STOP_TIMEOUT_S)
        # 0: stopped as the layer is (its process group's SIGTERM); else its listeners are gone
        # and the other processes serve its links
        if process.returncode != 0:
            logger.error("fault layer worker %d went away (exit code %s)", process.pid, process.returncode)

    def _answer(self, message: Message, blob: bytes) -> Any:
        """A worker's call, answered from the one state, at once (a hold: when released)."""
        state, op = self.state, message["op"]
        if op == "memory":
            return {"memory": state.seen_generations.get(message["rule"], [])}
        if op == "hold":
            return _held(state.hold(message["rule"], message["max_s"]))
        link = state.links[message["link"]]
        if op == "arrive":
            document = json_decode.loads(blob) if blob else None
            row, fired = state.decide(link, message["path"], document, message["cookie"], message["session"])
            rules = [{"id": r.id, "server": r.server, "effect": r.effect, "params": r.params} for r in fired]
            return _settled(state, {"row": row, "fired": rules})
        if op == "answered":
            state.learn(message["row"], message["status"], message["texts"], message["cookies"])
            return _settled(
                state, {"watch": message["document"] and state.watching(link.server, message["path"])}
            )
        if op == "observe":
            state.observe(link.server, message["path"], message["generations"])
            return {}
        raise ValueError(f"unknown call {op!r}")


async def _held(waiting: Any) -> Message:
    await waiting
    return {}


def _settled(state: LayerState, answer: Message) -> Message | Awaitable[Message]:
    """The answer, once every worker knows the state's summary as it is now (at once if it does)."""
    if state.settled():
        return answer
    return _after_settling(state, answer)


async def _after_settling(state: LayerState, answer: Message) -> Message:
    await state.settle()
    return answer
