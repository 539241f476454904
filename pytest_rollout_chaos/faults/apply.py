"""Running a fault, written once: preflight and inject, heal, each recorded in the History.

The scenario scheduler (``engine.schedule``) and ``chaos_faults`` (``injector``) call the two
halves and own timing, duration and healing on every path. Every inject and heal becomes one
History event: ``source="fault"``, ``kind="info"``, op ``"inject"`` or ``"heal"``, data
``{"fault": kind, "target": ..., **params, **facts}`` plus ``took_s``, and ``error`` when the
step raised (the error still propagates).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from pytest_rollout_chaos.faults.base import Fault, FaultContext, Preflight


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
