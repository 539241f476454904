"""``finite_logprobs``: no NaN, Inf or null logprob reaches the trainer in a non-aborted rollout."""

from __future__ import annotations

from typing import ClassVar

from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, describe, story, verdict
from pytest_rollout_chaos.invariants.rules import bad_logprob


class FiniteLogprobs:
    name: ClassVar[str] = "finite_logprobs"

    def check(self, observation: Observation) -> Verdict:
        if observation.rollouts is None:
            if observation.raised is not None:
                return verdict(self.name, Status.PASS, "the collector raised; no logprob reached the trainer")
            return verdict(self.name, Status.UNKNOWN, "the collector neither returned nor raised")
        bad = []
        for rollout in observation.rollouts:
            if rollout is None or rollout.status == "aborted":
                continue
            reason = bad_logprob(rollout.turns)
            if reason is not None:
                bad.append(
                    f"row {rollout.row_index} ({rollout.status}, {rollout.attempts} attempts): {reason}"
                )
        if not bad:
            return verdict(self.name, Status.PASS, "every logprob handed back is a finite number")
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
