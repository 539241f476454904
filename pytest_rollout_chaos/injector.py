"""Faults by name from Python tests: the ``chaos_faults`` fixture and the ``chaos_fault`` marker.

YAML covers simple schedules; a Python test that needs a sequence of its own injects through
this (Jepsen's advice: complex sequences belong in code). Names, targets and parameters are
exactly those of the scenario format, validated by the same registry; ``agent`` and
``collector->agent`` stand for every agent instance. Every fault injected here is healed when
the block or the test ends, newest first, and recorded in the test's History: the trial's
(``trial.open_trial``), which the test's collector writes to as well.

It checks like a scenario does: ``unacted`` lists each inject whose faults touched nothing (or
not what its ``expect_hits=`` says), counted by the same rule (``acting``), and the plugin fails
a test that passed with such a fault. One ``inject`` is judged as a whole, as a scenario step
is: on ``agent`` it puts one fault on each agent instance, and a row lives on one of them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from pytest_rollout_chaos import acting
from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.apply import Applied, heal_recorded, inject_recorded
from pytest_rollout_chaos.faults.base import Touched
from pytest_rollout_chaos.trial import Trial

SETTLE_S = 2.0


@dataclass(slots=True)
class _Call:
    """One ``inject`` call: what it asked for, and the faults it put on (one per instance).

    It is the step of each of its faults' ``Applied`` records, as a scenario step is in a run.
    """

    asked: str
    expect_hits: int | None
    faults: list[Applied[_Call]] = field(default_factory=list)


class FaultInjector:
    """``await injector.inject("latency", "agent->model", latency_ms=200)``; healed on exit."""

    def __init__(self, trial: Trial) -> None:
        self._stack = trial.stack
        self._ctx = trial.faults
        self._active: list[Applied[_Call]] = []
        self._calls: list[_Call] = []

    async def __aenter__(self) -> FaultInjector:
        return self

    def cannot_act(self, kind: str, target: str) -> str | None:
        """Why a ``kind`` fault on ``target`` cannot act in this run (a process fault on a server
        this run did not start, a Ray fault on a server not in a Ray actor), or None."""
        return acting.cannot_act(self._stack, kind, target)

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.heal_all()

    async def inject(
        self, kind: str, target: str, *, expect_hits: int | None = None, **params: Any
    ) -> list[Mapping[str, object]]:
        """Inject ``kind`` on ``target`` (every agent for ``agent``); return what each inject reported.

        ``expect_hits`` says how many requests (or calls) the faults must touch together, as a
        scenario step's does: by default at least one; 0 for a fault meant to hit nothing.
        """
        if expect_hits is not None and (
            not isinstance(expect_hits, int) or isinstance(expect_hits, bool) or expect_hits < 0
        ):
            raise FaultError(
                f"{kind} on {target!r}: expect_hits: expected an integer >= 0, got {expect_hits!r}"
            )
        if (reason := self.cannot_act(kind, target)) is not None:
            raise FaultError(f"{kind} on {target!r}: {reason}")  # refused before it starts: nothing to heal
        faults = [
            registry.build(kind, {**params, "target": one}) for one in self._stack.expand_target(target)
        ]
        shown = ", ".join(f"{key}={value!r}" for key, value in params.items())
        call = _Call(f"inject {kind}({shown}) on {target}", expect_hits)
        self._calls.append(call)
        facts = []
        for fault in faults:
            entry = Applied(call, fault, time.monotonic())
            self._active.append(entry)
            entry.inject_returned(await inject_recorded(fault, self._ctx))
            call.faults.append(entry)  # only a fault whose inject returned is judged
            facts.append(entry.facts)
        return facts

    @contextlib.asynccontextmanager
    async def applied(
        self, kind: str, target: str, *, expect_hits: int | None = None, **params: Any
    ) -> AsyncIterator[list[Mapping[str, object]]]:
        """``async with injector.applied(...)``: the fault holds inside the block only."""
        first = len(self._active)
        try:
            yield await self.inject(kind, target, expect_hits=expect_hits, **params)
        finally:
            await self._heal(self._active[first:])
            del self._active[first:]

    async def heal_all(self) -> None:
        """Heal every fault still active, newest first; idempotent."""
        active, self._active = self._active, []
        await self._heal(active)

    async def _heal(self, faults: list[Applied[_Call]]) -> None:
        errors: list[BaseException] = []
        for entry in reversed(faults):
            if entry.healed_at is None:
                entry.healed_at = time.monotonic()
            entry.healed = True
            try:
                await heal_recorded(entry.fault, self._ctx)
            except Exception as error:  # heal the rest, then report
                errors.append(error)
        if errors:
            raise errors[0]

    def unacted(self) -> list[str]:
        """One line per ``inject`` whose faults did not touch what it said, counted up to now.

        Waits first (briefly) until the fault layer has recorded the outcome of every request.
        A fault still on counts until now.
        """
        if not any(call.faults for call in self._calls):
            return []
        history = self._ctx.history
        acting.wait_settled(history, timeout_s=SETTLE_S)
        now, events = time.monotonic(), history.events()
        ran = f"the test ran until t={now - history.t0:.2f}s"
        lines = []
        for call in self._calls:
            if not call.faults:
                continue
            found = [
                acting.touched(
                    entry.fault,
                    events,
                    injected_at=entry.injected_at,
                    returned_at=entry.returned_at,
                    healed_at=entry.healed_at,
                    facts=entry.facts,
                    ended_at=now,
                )
                for entry in call.faults
            ]
            count = sum(touched.count for touched in found)
            if acting.acted_as_wanted(count, call.expect_hits):
                continue
            first = call.faults[0]
            lines.append(
                acting.not_acted(
                    call.asked,
                    injected_at=first.injected_at,
                    found=Touched(count, found[0].counted),
                    wanted=call.expect_hits,
                    matched=first.facts.get("match"),
                    ran=ran,
                    t0=history.t0,
                )
            )
        return lines
