"""``finite_logprobs``: no NaN, Inf or null logprob reaches the trainer in a non-aborted rollout.

A returned batch whose rollouts hand back no logprob at all (every row aborted, no turns) holds
nothing to judge: NOT_JUDGED. A raise hands the trainer nothing, which is judged and holds.
"""

from __future__ import annotations

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
from pytest_rollout_chaos.invariants.rules import bad_logprob


class FiniteLogprobs:
    name: ClassVar[str] = "finite_logprobs"

    def check(self, observation: Observation) -> Verdict:
        rollouts = rollouts_to_judge(
            observation, self.name, raised="the collector raised; no logprob reached the trainer"
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        handed = [r for r in rollouts if r is not None and r.status != "aborted" and r.turns]
        if not handed:
            return not_judged(
                self.name, "no logprob was handed back: no rollout that is not aborted has a turn"
            )
        count = sum(len(turn.generation_log_probs) for rollout in handed for turn in rollout.turns)
        bad = []
        for rollout in handed:
            reason = bad_logprob(rollout.turns)
            if reason is not None:
                bad.append(
                    f"row {rollout.row_index} ({rollout.status}, {rollout.attempts} attempts): {reason}"
                )
        if not bad:
            return verdict(self.name, Status.PASS, f"each of {count} logprobs handed back is a finite number")
        history = observation.history
        evidence = bad + describe(
            [event for event in history if event.source == "fault" or event.op == "retry"][-6:], history
        )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=f"non-finite logprobs reached the trainer in {len(bad)} rollouts",
                expected="affected rows retried a bounded number of times, then aborted with that reason",
            ),
            evidence,
        )
