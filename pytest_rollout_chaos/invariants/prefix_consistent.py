"""``prefix_consistent``: turn k+1's prompt extends turn k's prompt + generation, or the row is aborted.

Judged on every returned rollout that is not aborted and has two turns or more; with none of
those (single-turn tasks, every row aborted) there is no prefix to keep: NOT_JUDGED.
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
from pytest_rollout_chaos.invariants.rules import prefix_mismatch


class PrefixConsistent:
    name: ClassVar[str] = "prefix_consistent"

    def check(self, observation: Observation) -> Verdict:
        rollouts = rollouts_to_judge(
            observation, self.name, raised="the collector raised; no tokens reached the trainer"
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        multi_turn = [r for r in rollouts if r is not None and r.status != "aborted" and len(r.turns) > 1]
        if not multi_turn:
            return not_judged(
                self.name, "no returned rollout has two turns or more, so no prefix had to be kept"
            )
        bad = []
        for rollout in multi_turn:
            reason = prefix_mismatch(rollout.turns)
            if reason is not None:
                bad.append(f"row {rollout.row_index}: {reason}")
        if not bad:
            return verdict(
                self.name,
                Status.PASS,
                f"each of {len(multi_turn)} multi-turn rollouts extends its own earlier tokens",
            )
        history = observation.history
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"prefix drift passed through in {len(bad)} rollouts: the trainer would train on "
                    "tokens the model never produced"
                ),
                expected="drift repaired by EOS-boundary splicing, or the rollout aborted with that reason",
            ),
            bad + describe(observation.history.events(source="fault")[-4:], history),
        )
