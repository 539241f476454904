"""Faults by name from Python tests: the ``chaos_faults`` fixture and the ``chaos_fault`` marker.

YAML covers simple schedules; a Python test that needs a sequence of its own injects through
this (Jepsen's advice: complex sequences belong in code). Names, targets and parameters are
exactly those of the scenario format, validated by the same registry; ``agent`` and
``collector->agent`` stand for every agent instance. Every fault injected here is healed when
the block or the test ends, newest first, and recorded in the test's History: the trial's
(``trial.open_trial``), which the test's collector writes to as well.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any

from pytest_rollout_chaos import acting
from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.apply import heal_recorded, inject_recorded
from pytest_rollout_chaos.faults.base import Fault
from pytest_rollout_chaos.trial import Trial


class FaultInjector:
    """``await injector.inject("latency", "agent->model", latency_ms=200)``; healed on exit."""

    def __init__(self, trial: Trial) -> None:
        self._stack = trial.stack
        self._ctx = trial.faults
        self._active: list[Fault] = []

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

    async def inject(self, kind: str, target: str, **params: Any) -> list[Mapping[str, object]]:
        """Inject ``kind`` on ``target`` (every agent for ``agent``); return what each inject reported."""
        if (reason := self.cannot_act(kind, target)) is not None:
            raise FaultError(f"{kind} on {target!r}: {reason}")  # refused before it starts: nothing to heal
        faults = [
            registry.build(kind, {**params, "target": one}) for one in self._stack.expand_target(target)
        ]
        facts = []
        for fault in faults:
            self._active.append(fault)
            facts.append(await inject_recorded(fault, self._ctx))
        return facts

    @contextlib.asynccontextmanager
    async def applied(
        self, kind: str, target: str, **params: Any
    ) -> AsyncIterator[list[Mapping[str, object]]]:
        """``async with injector.applied(...)``: the fault holds inside the block only."""
        first = len(self._active)
        try:
            yield await self.inject(kind, target, **params)
        finally:
            await self._heal(self._active[first:])
            del self._active[first:]

    async def heal_all(self) -> None:
        """Heal every fault still active, newest first; idempotent."""
        active, self._active = self._active, []
        await self._heal(active)

    async def _heal(self, faults: list[Fault]) -> None:
        errors: list[BaseException] = []
        for fault in reversed(faults):
            try:
                await heal_recorded(fault, self._ctx)
            except Exception as error:  # heal the rest, then report
                errors.append(error)
        if errors:
            raise errors[0]
