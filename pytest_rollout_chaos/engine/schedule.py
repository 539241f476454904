"""The fault scheduler: each step waits for its trigger, injects, holds for ``duration_s``, heals.

Timing, duration and heal-on-every-path live here, once; recording lives in ``faults.apply``.
Triggers read only the History (``after_completed`` counts finished rollouts, ``on_request``
counts requests a server received), so the scheduler never reaches into the collector.
``stop`` cancels steps still waiting and heals every injected fault, newest first; a heal
error is kept and raised after all heals ran, never instead of the run's own outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults import apply, registry
from pytest_rollout_chaos.faults.apply import describe, heal_recorded, inject_recorded
from pytest_rollout_chaos.faults.base import Fault, FaultContext
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.sends import RUN_OP, spans
from pytest_rollout_chaos.scenario.model import FaultStep, Trigger

_logger = logging.getLogger(__name__)
POLL_S: Final = 0.02
INJECT_GRACE_S: Final = 10.0

# What the scheduler keeps of each fault it injects: the record ``chaos_faults`` keeps too, its
# step a scenario's. ``acted`` and the reports import it from here.
Applied: TypeAlias = apply.Applied[FaultStep]


FINISHING_OPS: Final = frozenset({RUN_OP, "POST /verify"})
"""The requests whose answer ends a trajectory: a ``/run``, or the ``/verify`` of its last step."""


def completed_rollouts(history: History) -> int:
    """Rollouts finished so far, as the collector side saw them: the Gym client's ``run`` ok or the
    collector's rollout info; without the harness's Gym client (none of its ``run`` invokes: NeMo
    Gym's own client sends, or a trainer's loop runs the trajectories itself), the fault layer's
    record of each row's ``/run``, or of its ``/verify`` (the last request of a trajectory whose
    environment the collector steps itself, as SkyRL's does), answered on the collector's links
    stands for the client's."""
    if history.events(source="collector", kind="invoke", op="run"):
        runs = len(history.events(source="collector", kind="ok", op="run"))
    else:
        runs = len(
            {
                span.row
                for span in spans(history)
                if span.from_collector and span.op in FINISHING_OPS and span.row is not None
                if span.outcome == "ok" and span.status is not None and span.status < 300
            }
        )
    done = sum(
        1
        for event in history.events(source="collector", op="rollout")
        if event.data.get("status") in ("completed", "truncated")
    )
    return max(runs, done)


def requests_seen(history: History, server: str, route: str | None = None) -> int:
    """Requests server ``server`` received so far (on ``route`` only, when given), as the fault
    layer in front of it recorded them.

    ``server`` is a scenario name: ``policy``, ``model``, ``resources``, ``head``, an agent
    instance, or ``agent`` for all agent instances together.
    """
    return sum(
        1
        for event in history.events(kind="invoke")
        if event.op != "hook" and (event.data.get("server") == server or event.source == server)
        if route is None or event.op.partition(" ")[2].partition("?")[0] == route
    )


def _setter(event: asyncio.Event) -> Callable[[asyncio.Task[None]], None]:
    """A done-callback that sets ``event``."""
    return lambda _task: event.set()


@dataclass
class Schedule:
    """Runs the scenario's fault steps against ``ctx``; targets already expanded per server/link."""

    steps: Sequence[tuple[FaultStep, tuple[str, ...]]]
    ctx: FaultContext
    started_at: float = field(default_factory=time.monotonic)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _active: list[Applied] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    _injecting: set[asyncio.Future[Any]] = field(default_factory=set)
    _fired: list[FaultStep] = field(default_factory=list)
    _built: list[tuple[FaultStep, list[Fault]]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        # Every step's faults, built (and so validated) before anything is injected.
        self._built = [
            (step, [registry.build(step.kind, {**step.params, "target": target}) for target in targets])
            for step, targets in self.steps
        ]

    async def start(self) -> None:
        """Start every step; return once the ``at: start`` ones are armed (injected, or failed)."""
        self.started_at = time.monotonic()
        arming = []
        for step, faults in self._built:
            armed = asyncio.Event()
            if step.at.kind == "start":
                arming.append(armed)
            task = asyncio.create_task(self._run_step(step, faults, armed), name=f"fault-{step.kind}")
            self._tasks.append(task)
            task.add_done_callback(_setter(armed))  # a step that died arms nothing, and holds nothing
        for armed in arming:
            await armed.wait()

    async def _run_step(self, step: FaultStep, faults: list[Fault], armed: asyncio.Event) -> None:
        await self._wait_for(step.at)
        self._fired.append(step)
        try:
            active = await self._inject_all(step, faults)
        finally:
            armed.set()
        if active is not None and step.duration_s is not None:
            await asyncio.sleep(step.duration_s)
            for entry in active:
                await self._heal(entry)

    async def _inject_all(self, step: FaultStep, faults: list[Fault]) -> list[Applied] | None:
        """Inject each of the step's faults; None when one failed (recorded in ``errors``)."""
        active = []
        for fault in faults:
            entry = Applied(step, fault, time.monotonic())
            self._active.append(entry)
            active.append(entry)
            # An inject is short and finishes even when the run ends meanwhile (see ``stop``).
            injecting = asyncio.ensure_future(inject_recorded(fault, self.ctx))
            injecting.add_done_callback(entry.inject_done)
            self._injecting.add(injecting)
            try:
                await asyncio.shield(injecting)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the heal still runs; the run fails as a fault error
                self.errors.append(FaultError(f"injecting {describe(fault)} failed: {error}"))
                return None
            finally:
                if injecting.done():
                    self._injecting.discard(injecting)
        return active

    async def _wait_for(self, trigger: Trigger) -> None:
        if trigger.kind == "start":
            return
        if trigger.kind == "after_s":
            delay = (trigger.after_s or 0.0) - (time.monotonic() - self.started_at)
            await asyncio.sleep(max(0.0, delay))
            return
        while not self._triggered(trigger):
            await asyncio.sleep(POLL_S)

    def _triggered(self, trigger: Trigger) -> bool:
        if trigger.kind == "after_completed":
            return completed_rollouts(self.ctx.history) >= (trigger.completed or 0)
        if trigger.kind == "on_request":
            seen = requests_seen(self.ctx.history, trigger.server or "agent", trigger.route)
            return seen >= (trigger.nth or 1)
        raise FaultError(f"unknown trigger {trigger.kind!r}")

    async def _heal(self, entry: Applied) -> None:
        if entry.healed:
            return
        entry.healed = True
        entry.healed_at = time.monotonic()
        try:
            await heal_recorded(entry.fault, self.ctx)
        except Exception as error:
            _logger.exception("healing %s failed", describe(entry.fault))
            self.errors.append(FaultError(f"healing {describe(entry.fault)} failed: {error}"))

    async def stop(self) -> None:
        """Cancel waiting steps, then heal every injected fault (newest first)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for injecting in list(self._injecting):  # let an inject under way finish before healing it
            with contextlib.suppress(Exception):
                await asyncio.wait_for(injecting, timeout=INJECT_GRACE_S)
        for entry in reversed(self._active):
            await self._heal(entry)

    @property
    def injected(self) -> int:
        return len(self._active)

    @property
    def applied(self) -> list[Applied]:
        """Every fault injected so far, in injection order."""
        return list(self._active)

    @property
    def unfired(self) -> list[FaultStep]:
        """Steps whose trigger never came before the run ended: the scenario tested nothing there."""
        return [step for step, _ in self.steps if not any(step is fired for fired in self._fired)]
