"""One direction of one proxied connection: a reader, a chain of toxic stages, a writer.

``source -> reader -> [noop stage] -> [toxic stage]... -> writer -> dest``. The reader is the
source socket's callback (``endpoint.Endpoint``); with no toxic on the link and nothing in
flight, it writes each piece straight to ``dest``, pausing the source while ``dest`` is full.
Each stage runs its toxic's behaviour in its own task and passes items to ``stage.output`` (the
next stage's input queue, or the writer's). Toxics change on live connections, as in Toxiproxy:
- add: a new stage goes at the end; the old last stage's output is re-pointed to it;
- update: the stage's task is cancelled and restarted with the new attributes, keeping the
  item it held;
- remove: the stage's task is cancelled, the item it held and its queue are flushed on in
  order, and the previous stage is re-pointed past it (all without an await in between, so
  nothing overtakes).
Toxicity is drawn each time a toxic starts on a stage, from the server's seeded generator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable

from pytest_rollout_chaos.servers.toxiproxy.endpoint import Endpoint
from pytest_rollout_chaos.servers.toxiproxy.toxics import Chunk, Close, Item, ToxicSpec, run_noop

_logger = logging.getLogger("toxiproxy.link")


class Stage:
    """One toxic on one link: its input queue, where it sends, and what it holds right now."""

    def __init__(self, toxic: ToxicSpec | None, output: asyncio.Queue[Item], rng: random.Random) -> None:
        self.toxic = toxic
        self.input: asyncio.Queue[Item] = asyncio.Queue()
        self.output = output
        self.held: Item | None = None
        self.closed = False  # the behaviour ended the stream; nothing more passes this stage
        self.bytes_passed = 0  # per-link state of limit_data, kept across updates
        self._rng = rng
        self._task: asyncio.Task[None] | None = None
        self.active = False

    async def receive(self) -> Item:
        """The next item: the one still held from an interrupted run, else the next queued."""
        if self.held is None:
            self.held = await self.input.get()
        return self.held

    def send(self, item: Item) -> None:
        if isinstance(item, Close):
            self.closed = True
        self.output.put_nowait(item)

    def forward(self, item: Item) -> None:
        """Send the held item on and let go of it."""
        self.held = None
        self.send(item)

    def start(self) -> None:
        toxic = self.toxic
        self.active = toxic is not None and self._rng.random() < toxic.toxicity
        if toxic is not None and self.active:
            self._task = asyncio.create_task(toxic.kind.run(self, toxic.attributes, self._rng))
        else:
            self._task = asyncio.create_task(run_noop(self, {}, self._rng))
        self._task.add_done_callback(self._report_crash)

    def _report_crash(self, task: asyncio.Task[None]) -> None:
        # A behaviour that raises would stall its link silently: say so in the server log.
        if not task.cancelled() and task.exception() is not None:
            name = self.toxic.name if self.toxic is not None else "noop"
            _logger.error("toxic %s crashed", name, exc_info=task.exception())

    async def interrupt(self) -> None:
        """Stop the behaviour; whatever it held stays in ``held``."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()


class Link:
    """``source`` to ``dest`` through the toxics of one stream (upstream or downstream)."""

    def __init__(
        self,
        name: str,
        *,
        source: Endpoint,
        dest: Endpoint,
        toxics: list[ToxicSpec],
        rng: random.Random,
        on_close: Callable[[Link, bool], None],
    ) -> None:
        self.name = name
        self._source = source
        self._dest = dest
        self._rng = rng
        self._on_close = on_close
        self._sink: asyncio.Queue[Item] = asyncio.Queue()
        self.stages: list[Stage] = [Stage(None, self._sink, rng)]
        for toxic in toxics:
            self._append(toxic)
        self._tasks: list[asyncio.Task[None]] = []
        self.bytes_read = 0
        self.bytes_written = 0
        self._source_ended = False

    def _append(self, toxic: ToxicSpec) -> Stage:
        last = self.stages[-1]
        stage = Stage(toxic, last.output, self._rng)
        last.output = stage.input
        self.stages.append(stage)
        return stage

    def start(self) -> None:
        for stage in self.stages:
            stage.start()
        self._tasks = [asyncio.create_task(self._write())]
        self._dest.on_writable = self._dest_writable
        self._source.attach(self._read, self._source_end)

    def stop(self) -> None:
        self._source_ended = True
        for stage in self.stages:
            stage.cancel()
        for task in self._tasks:
            task.cancel()

    # -- live toxic changes ---------------------------------------------------------------------
    def add_toxic(self, toxic: ToxicSpec) -> None:
        self._append(toxic).start()

    async def update_toxic(self, toxic: ToxicSpec) -> None:
        stage = self._find(toxic.name)
        if stage is None or stage.closed:
            return
        await stage.interrupt()
        stage.toxic = toxic
        if not stage.closed:
            stage.start()

    async def remove_toxic(self, name: str) -> None:
        stage = self._find(name)
        if stage is None:
            return
        await stage.interrupt()
        index = self.stages.index(stage)
        del self.stages[index]
        previous = self.stages[index - 1]
        if stage.closed:
            previous.output = stage.output  # nothing after a close matters any more
            return
        if stage.active and stage.toxic is not None and stage.toxic.kind.closes_on_removal:
            stage.send(Close())
        else:
            if stage.held is not None:
                stage.output.put_nowait(stage.held)
            while not stage.input.empty():
                stage.output.put_nowait(stage.input.get_nowait())
        previous.output = stage.output

    def _find(self, name: str) -> Stage | None:
        for stage in self.stages[1:]:
            if stage.toxic is not None and stage.toxic.name == name:
                return stage
        return None

    # -- the two ends ---------------------------------------------------------------------------
    def _read(self, data: bytes) -> None:
        if self._source_ended:
            return
        self.bytes_read += len(data)
        if not self._untouched():
            self.stages[0].input.put_nowait(Chunk(data, time.monotonic()))
            return
        try:
            self._dest.write(data)
        except ConnectionError as error:
            self._source.pause_reading()
            self._source_end(error)
            return
        self.bytes_written += len(data)
        if self._dest.full:
            self._source.pause_reading()  # until dest drains (``_dest_writable``)

    def _dest_writable(self) -> None:
        if not self._source_ended:
            self._source.resume_reading()

    def _source_end(self, error: Exception | None) -> None:
        """The source closed (EOF, or lost with ``error``): the end goes down the stages."""
        if self._source_ended:
            return
        self._source_ended = True
        if error is not None:
            _logger.info("link %s: source ended: %r", self.name, error)
        self.stages[0].input.put_nowait(Close())

    def _untouched(self) -> bool:
        """No toxic on the link and nothing in flight: a chunk may skip the stages, as Toxiproxy's
        noop pipe would pass it on unchanged; a toxic added later sees every chunk after it."""
        noop = self.stages[0]
        return len(self.stages) == 1 and noop.held is None and noop.input.empty() and self._sink.empty()

    async def _write(self) -> None:
        reset = False
        try:
            while True:
                item = await self._sink.get()
                if isinstance(item, Close):
                    reset = item.reset
                    break
                self._dest.write(item.data)
                await self._dest.drain()
                self.bytes_written += len(item.data)
        except (ConnectionError, OSError) as error:
            _logger.info("link %s: destination failed: %r", self.name, error)
        self._on_close(self, reset)
