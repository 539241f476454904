"""``status_recorded``: a rollout whose last generation stopped at the token limit is ``truncated``.

The policy says why it stopped each generation (``finish_reason``), and the fault layer records
it with the generation's fingerprint (``served.finishes``), on the model server's link in gym
style and on the collector's own in native style. A rollout handed back as completed whose last
turn is a generation the policy cut at the token limit (``length``) is a truncated sample sold
as a finished one: the trainer scores a cut answer as if the model had ended it (SkyRL maps
``length`` to truncated; NeMo RL keeps ``truncated`` per sample for its loss mask). A rollout
whose last generation stopped on its own may still be ``truncated``: a turn limit (the
collector's, or the agent's ``max_steps``) cuts an episode between generations, and the judge
does not see that limit. A rollout whose last generation is not in the record (or was generated
twice with different reasons) is not judged; with no rollout to judge, nothing is (NOT_JUDGED).
"""

from __future__ import annotations

from typing import ClassVar, Final

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.history import fingerprint
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    not_judged,
    rollouts_to_judge,
    story,
    verdict,
)
from pytest_rollout_chaos.invariants.served import finishes

AT_LIMIT: Final = "length"


class StatusRecorded:
    name: ClassVar[str] = "status_recorded"

    def check(self, observation: Observation) -> Verdict:
        rollouts = rollouts_to_judge(
            observation, self.name, raised="the collector raised; it claimed no status"
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        claimed = [r for r in rollouts if r is not None and r.status != "aborted" and r.turns]
        if not claimed:
            return not_judged(self.name, "no completed or truncated rollout with turns came back")
        record = finishes(observation.history)
        if not record:
            return not_judged(
                self.name,
                f"{len(claimed)} rollouts came back, but the History holds no finish reason of the "
                "policy's (no fault layer in front of the policy, or answers without choices)",
            )
        judged: list[tuple[Rollout, str]] = []
        for rollout in claimed:
            reasons = record.get(fingerprint(rollout.turns[-1].generation_token_ids), set())
            if len(reasons) == 1:
                judged.append((rollout, next(iter(reasons))))
        if not judged:
            return not_judged(
                self.name,
                f"the last generation of none of {len(claimed)} rollouts is in the policy's record "
                "with one finish reason",
            )
        problems = [
            f"row {rollout.row_index}: the collector says completed, but the policy stopped its last "
            f"generation ({len(rollout.turns[-1].generation_token_ids)} tokens, turn "
            f"{len(rollout.turns) - 1}) at the token limit (finish_reason {AT_LIMIT!r})"
            for rollout, reason in judged
            if reason == AT_LIMIT and rollout.status == "completed"
        ]
        if problems:
            return verdict(
                self.name,
                Status.FAIL,
                story(
                    observation,
                    what=f"{len(problems)} rollouts cut at the token limit were handed back as completed",
                    expected=(
                        "a rollout whose last generation stopped at the token limit handed back truncated"
                    ),
                ),
                problems,
            )
        cut = sum(1 for _, reason in judged if reason == AT_LIMIT)
        return verdict(
            self.name,
            Status.PASS,
            f"the status of {len(judged)} rollouts agrees with why the policy stopped their last generation "
            f"({cut} cut at the token limit, handed back truncated)",
        )
