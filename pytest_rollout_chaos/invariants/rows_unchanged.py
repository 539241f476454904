"""``rows_unchanged``: the rows the caller handed to ``collect`` are as they were when it returns.

A trainer keeps its batch after rollout collection: it computes advantages over it, logs it,
retries it, hands it to the next step's dataloader or to validation. A collector that writes
into the caller's rows (a shallow copy whose nested ``responses_create_params`` it then edits on
a retry, a result merged back into the row, a key popped before sending) changes what the
trainer trains on and repeats next time, and nothing fails where it happened. The engine keeps
a deep copy of the rows from before ``collect``; any difference, raised or not, fails. NOT_JUDGED
where nobody kept the rows as ``collect`` left them (a Python test's own collection).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict

SHOWN: Final = 5  # the changed places the evidence lists


class RowsUnchanged:
    name: ClassVar[str] = "rows_unchanged"

    def check(self, observation: Observation) -> Verdict:
        after = observation.rows_after
        if after is None:
            return not_judged(self.name, "nobody kept the rows as collect left them")
        if len(after) != len(observation.rows):
            changes = [f"the list of rows: {len(observation.rows)} handed over, {len(after)} after collect"]
        else:
            changes = [
                change
                for position, (before, now) in enumerate(zip(observation.rows, after, strict=True))
                for change in differences(f"rows[{position}]", before, now)
            ]
        if not changes:
            return verdict(self.name, Status.PASS, f"all {len(after)} rows are as they were handed over")
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=f"the collector changed the caller's rows in {len(changes)} place(s): {changes[0]}",
                expected="collect leaves the rows it was given as they were (copy before changing one)",
            ),
            changes[:SHOWN],
        )


def differences(where: str, before: Any, now: Any) -> list[str]:
    """Each place where ``now`` differs from ``before``, as ``where.key: before -> now``."""
    if isinstance(before, Mapping) and isinstance(now, Mapping):
        found = []
        for key in [*before, *(key for key in now if key not in before)]:
            if key not in now:
                found.append(f"{where}.{key}: removed (was {before[key]!r})")
            elif key not in before:
                found.append(f"{where}.{key}: added ({now[key]!r})")
            else:
                found += differences(f"{where}.{key}", before[key], now[key])
        return found
    if isinstance(before, list) and isinstance(now, list) and len(before) == len(now):
        return [
            change
            for position, (old, new) in enumerate(zip(before, now, strict=True))
            for change in differences(f"{where}[{position}]", old, new)
        ]
    return [] if before == now else [f"{where}: {before!r} -> {now!r}"]
