"""A scenario that judged nothing of what it says it tests is vacuous: it fails, never passes.

Two ways, both read from an already judged run. An invariant the scenario lists in
``expect.invariants`` said NOT_JUDGED (no failure to isolate, no multi-turn rollout, no server
record), while neither ``expect.not_judged`` gives the reason it may nor the collector's
declarations make it not applicable (``fit.inapplicable``); and a witness named in
``expect.witness`` was not seen as often as asked. The standing invariants a scenario does not
list may find nothing to judge silently: they guard every scenario, not this one's point.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

from pytest_rollout_chaos.invariants.base import Status, Verdict
from pytest_rollout_chaos.invariants.witnesses import Sighting
from pytest_rollout_chaos.scenario.model import Expectation

HEADER: Final = "not judged (the scenario tested nothing there):"
REMEDY: Final = (
    "make the workload produce what these judge or witness (more rows, other tasks, a fault that "
    "makes it happen); where an invariant cannot judge anything on this scenario, say why in "
    "expect.not_judged: {name: reason}; a witness not seen means the condition did not happen on "
    "this stack, so the run proves nothing either way"
)


def vacuous(
    expect: Expectation,
    verdicts: Sequence[Verdict],
    sightings: Sequence[Sighting],
    *,
    not_applicable: Collection[str] = (),
) -> list[str]:
    """One line per listed invariant that judged nothing, unless ``expect.not_judged`` excuses it or
    it does not apply to the collector (``not_applicable``), then per witness not seen."""
    excused = {*expect.not_judged, *not_applicable}
    lines = [
        f"{verdict.name}: NOT_JUDGED: {verdict.summary}"
        for verdict in verdicts
        if verdict.status is Status.NOT_JUDGED
        and verdict.name in expect.invariants
        and verdict.name not in excused
    ]
    lines += [sighting.describe() for sighting in sightings if not sighting.seen]
    return lines


def section(lines: Sequence[str]) -> list[str]:
    """The ``not judged`` part of a failure story: a header, then each line indented."""
    return [HEADER, *(f"  {line}" for line in lines)]
