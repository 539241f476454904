"""``batched_env_eval``: env.step calls per turn = number of task groups, not samples (NeMo RL #1798/#2209).

Judged from what the environment served, never from what the collector says it did: the
resources server records each ``/step_batch`` call with, per item, its task group and how many
model turns its message log holds. Every (turn, task group) of the collection must be stepped by
exactly one call, and no call may mix task groups (a group's environment would see another
group's samples). Validation must keep one batched call per task group per turn; train may split
a group (a per-sample collector passes there, with a note), but never mix groups.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict

Group = tuple[int, str]  # (model turns so far, task group)


class BatchedEnvEval:
    name: ClassVar[str] = "batched_env_eval"

    def check(self, observation: Observation) -> Verdict:
        history = observation.history
        served = history.events(source="resources", op="step_batch")
        if not served:
            return not_judged(self.name, "the environment served no step_batch call (gym style has none)")
        groups = [_groups(event) for event in served]
        if any(found is None for found in groups):
            return verdict(
                self.name,
                Status.UNKNOWN,
                "the environment's step_batch records do not say each item's task and turn, so calls "
                "cannot be matched to task groups",
            )
        calls = [found for found in groups if found is not None]
        mixed = [(event, found) for event, found in zip(served, calls, strict=True) if len(set(found)) > 1]
        per_group = Counter(group for found in calls for group in set(found))
        split = {group: count for group, count in per_group.items() if count > 1}
        if mixed:
            return verdict(
                self.name,
                Status.FAIL,
                story(
                    observation,
                    what=(
                        f"{len(mixed)} env.step calls mixed task groups: one call stepped samples of "
                        f"{_listed(mixed[0][1])}"
                    ),
                    expected="one batched env.step per task group per turn, each holding only that group",
                ),
                [f"{event.describe(history.t0)}: {_listed(found)}" for event, found in mixed],
            )
        summary = f"{len(calls)} env.step calls for {len(per_group)} (turn, task group) pairs, one call each"
        if not split:
            return verdict(self.name, Status.PASS, summary)
        evidence = [
            f"turn {turn}, task {task!r}: {count} calls (batch sizes "
            f"{[len(found) for found in calls if (turn, task) in found]})"
            for (turn, task), count in sorted(split.items())
        ]
        if observation.mode != "validation":
            return verdict(
                self.name,
                Status.PASS,
                f"train mode: {len(calls)} env.step calls for {len(per_group)} (turn, task group) pairs "
                "(per-sample evaluation is allowed in train)",
                evidence,
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"per-sample env evaluation in validation: the environment served {len(calls)} "
                    f"env.step calls where {len(per_group)} batched calls (one per task group per turn) "
                    "were due"
                ),
                expected="exactly one batched env.step per task group per turn over all active samples",
            ),
            evidence,
        )


def _groups(event: Event) -> list[Group] | None:
    """Each item's (turn, task group) in one ``step_batch`` call; None if the record lacks them."""
    tasks, turns = event.data.get("tasks"), event.data.get("turns")
    if not isinstance(tasks, list) or not isinstance(turns, list) or len(tasks) != len(turns):
        return None
    if not all(isinstance(turn, int) for turn in turns):
        return None
    return [(turn, str(task)) for turn, task in zip(turns, tasks, strict=True)]


def _listed(found: Sequence[Group]) -> str:
    counts = Counter(found)
    return ", ".join(
        f"{count} of task {task!r} at turn {turn}" for (turn, task), count in sorted(counts.items())
    )
