"""Did every fault step act? A fault that fired but touched nothing proves nothing, so it fails the run.

Counted from the History once the run is over, for each injected fault, by its own class
(``Fault.touched``, through ``acting.touched``): the requests its fault-layer rule hit, the
requests on its link while it was on, the requests into the server a process or Ray fault took
down (in flight when it came, or sent while it held), the Gym calls ``short_results`` shortened,
the collection ``cancel`` cancelled. Whatever the count, a fault injected after the collection
ended touched nothing of it.

A step is judged by what its faults touched together: a step on ``agent`` puts one fault on each
agent instance, and a row lives on one of them. A step may say how many touches it expects
(``expect_hits``; 0 for a fault meant to hit nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_rollout_chaos import acting
from pytest_rollout_chaos.engine.schedule import Applied
from pytest_rollout_chaos.faults.apply import describe
from pytest_rollout_chaos.faults.base import Touched
from pytest_rollout_chaos.history import History


@dataclass(frozen=True, slots=True)
class Touches:
    """How much one injected fault touched, and what was counted."""

    applied: Applied
    count: int
    counted: str  # "requests hit by its rule", ...

    def describe(self) -> str:
        return f"{describe(self.applied.fault)}: {self.count} {self.counted}"


def count_touches(applied: Sequence[Applied], history: History, *, ended_at: float) -> list[Touches]:
    """What each successfully injected fault touched; a fault injected after ``ended_at`` touched 0."""
    events = history.events()
    found = []
    for entry in applied:
        if not entry.injected:
            continue  # its inject failed: a fault error already fails the run
        touched = acting.touched(
            entry.fault,
            events,
            injected_at=entry.injected_at,
            returned_at=entry.returned_at,
            healed_at=entry.healed_at,
            facts=entry.facts,
            ended_at=ended_at,
        )
        found.append(Touches(entry, touched.count, touched.counted))
    return found


def problems(touches: Sequence[Touches], *, started_at: float, ended_at: float, t0: float) -> list[str]:
    """One line per step whose faults did not act as it said, with what they matched and when."""
    steps: dict[int, list[Touches]] = {}
    for touch in touches:
        steps.setdefault(id(touch.applied.step), []).append(touch)
    ran = f"the collection ran from t={started_at - t0:.2f}s to t={ended_at - t0:.2f}s"
    lines = []
    for group in steps.values():
        step, first = group[0].applied.step, group[0].applied
        where = f"line {step.line}: {step.describe()}"
        late = [touch.applied for touch in group if touch.applied.injected_at > ended_at]
        if late:
            lines.append(f"{where} was injected at t={late[0].injected_at - t0:.2f}s, after the end: {ran}")
            continue
        count = sum(touch.count for touch in group)
        if acting.acted_as_wanted(count, step.expect_hits):
            continue
        lines.append(
            acting.not_acted(
                where,
                injected_at=first.injected_at,
                found=Touched(count, group[0].counted),
                wanted=step.expect_hits,
                matched=first.facts.get("match"),
                ran=ran,
                t0=t0,
            )
        )
    return lines
