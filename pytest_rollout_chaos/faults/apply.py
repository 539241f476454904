"""Running a fault, written once: preflight and inject, heal, each recorded in the History.

The scenario scheduler (``engine.schedule``) and ``chaos_faults`` (``injector``) call the two
halves and own timing, duration and healing on every path; each keeps what it put on as an
``Applied``, the one record of a fault's times and facts that ``acting.touched`` counts from.
Every inject and heal becomes one History event: ``source="fault"``, ``kind="info"``, op
``"inject"`` or ``"heal"``, data ``{"fault": kind, "target": ..., **params, **facts}`` plus
``took_s``, and ``error`` when the step raised (the error still propagates).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pytest_rollout_chaos.faults.base import Fault, FaultContext, Preflight

StepT = TypeVar("StepT")


@dataclass(slots=True)
class Applied(Generic[StepT]):
    """One fault put on: what asked for it, what its inject reported, and when it was on.

    The scheduler and ``chaos_faults`` keep the same record, so a fault's touches are counted
    alike from both. ``step`` is whatever asked for the fault (a scenario's ``FaultStep``, a
    test's ``inject`` call), generic because those types live in layers above this one.
    """

    step: StepT
    fault: Fault
    injected_at: float
    facts: Mapping[str, object] = field(default_factory=dict)
    injected: bool = False  # the inject returned (a failed one is a fault error of its own)
    returned_at: float | None = None  # when it returned
    healed_at: float | None = None
    healed: bool = False

    def inject_returned(self, facts: Mapping[str, object]) -> None:
        """Keep what the inject reported: the fault is on from now."""
        self.facts = facts
        self.injected = True
        self.returned_at = time.monotonic()

    def inject_done(self, injecting: asyncio.Future[Mapping[str, object]]) -> None:
        """Keep what a successful inject reported, also one that finished after a cancel."""
        if not injecting.cancelled() and injecting.exception() is None:
            self.inject_returned(injecting.result())


def fault_params(fault: Fault) -> dict[str, Any]:
    """The fault's parameters (every dataclass field but ``target``)."""
    if not dataclasses.is_dataclass(fault):
        return {}
    return {
        item.name: getattr(fault, item.name)
        for item in dataclasses.fields(fault)
        if item.name != "target" and item.init
    }


def describe(fault: Fault) -> str:
    """``latency(latency_ms=800) on model`` for timelines and messages."""
    params = ", ".join(f"{key}={value!r}" for key, value in fault_params(fault).items())
    return f"{fault.kind}({params}) on {fault.target}"


async def inject_recorded(fault: Fault, ctx: FaultContext) -> Mapping[str, object]:
    """Preflight and inject ``fault``; record it; return the facts it reported."""
    base = {"fault": fault.kind, "target": fault.target, **fault_params(fault)}
    started = time.monotonic()
    try:
        if isinstance(fault, Preflight):
            fault.preflight(ctx)
        facts = dict(await fault.inject(ctx))
    except BaseException as error:
        ctx.history.append("fault", "info", "inject", {**base, **_error_data(error, started)})
        raise
    ctx.history.append("fault", "info", "inject", {**base, **facts, "took_s": _since(started)})
    return facts


async def heal_recorded(fault: Fault, ctx: FaultContext) -> None:
    """Heal ``fault`` (idempotent) and record it."""
    base = {"fault": fault.kind, "target": fault.target, **fault_params(fault)}
    started = time.monotonic()
    try:
        await fault.heal(ctx)
    except BaseException as error:
        ctx.history.append("fault", "info", "heal", {**base, **_error_data(error, started)})
        raise
    ctx.history.append("fault", "info", "heal", {**base, "took_s": _since(started)})


def _since(started: float) -> float:
    return round(time.monotonic() - started, 4)


def _error_data(error: BaseException, started: float) -> dict[str, Any]:
    return {"error": f"{type(error).__name__}: {error}", "took_s": _since(started)}
