"""``accounted``: every row ends as exactly one rollout or the collector raised; none lost or duplicated."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    describe,
    not_judged,
    rollouts_to_judge,
    story,
    verdict,
)


class Accounted:
    name: ClassVar[str] = "accounted"

    def check(self, observation: Observation) -> Verdict:
        if not observation.rows:
            return not_judged(self.name, "no row was requested, so there is nothing to account for")
        rollouts = rollouts_to_judge(
            observation,
            self.name,
            raised=f"the collector raised {type(observation.raised).__name__}, failing the whole batch "
            "rather than handing back a partial one",
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        requested = observation.requested
        returned = [rollout for rollout in rollouts if rollout is not None]
        holes = len(rollouts) - len(returned)
        counts = Counter(rollout.row_index for rollout in returned)
        missing = sorted(set(requested) - set(counts))
        duplicated = sorted(index for index, count in counts.items() if count > 1)
        unknown = sorted(set(counts) - set(requested))
        problems = []
        if missing:
            problems.append(f"rows {missing} have no rollout (lost)")
        if holes:
            problems.append(f"{holes} list entries are None placeholders")
        if duplicated:
            problems.append(f"rows {duplicated} have more than one rollout (duplicated)")
        if unknown:
            problems.append(f"rollouts for rows {unknown} that were never requested")
        if not problems:
            return verdict(self.name, Status.PASS, f"all {len(requested)} rows came back exactly once")
        evidence = [f"{index}: {counts[index]} rollouts" for index in duplicated]
        lost_rows = set(missing)
        evidence += describe(
            [event for event in observation.history if event.data.get("row") in lost_rows][-8:],
            observation.history,
        )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what="; ".join(problems),
                expected="exactly one rollout per requested row (aborted with a reason if it failed), "
                "or an exception",
            ),
            evidence,
        )
