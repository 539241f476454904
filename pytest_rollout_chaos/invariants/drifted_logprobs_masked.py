"""``drifted_logprobs_masked``: a sample whose logprobs drifted from the model's carries no weight.

An inference engine whose numerics drift from the trainer's reports finite logprobs that are not
the ones the policy computes for the same tokens (vLLM before 0.17.0, in NeMo RL's Nemotron 3 Nano
guide); no NaN check sees them, and the importance ratio of the loss is then taken against them.
A trainer's defence is to score the batch with its own policy and mask the sequences that
disagree (NeMo RL's ``grpo.seq_logprob_error_threshold``, 2 in NeMo Gym's configs). So each row
whose answer the fault layer drifted (a ``logprob_drift`` rule that changed its logprobs) must
carry no weight in the train batch: left out of it (``Rollout.in_train_batch`` False), or in it
with its loss mask all zero (``Rollout.loss_mask``), or aborted. A raise holds: nothing was
trained. Whether a trainer masks a sample is the trainer's to show: a drifted row handed to
training with no loss mask (a collector that hands its trainer rollouts, as the reference
collector does, says nothing of their weight in the loss) is not judged, and with no drifted
row judged the verdict is NOT_JUDGED, as it is when no drift touched a row.
"""

from __future__ import annotations

from typing import ClassVar, Final

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    not_judged,
    rollouts_to_judge,
    story,
    verdict,
)

DRIFT_EFFECT: Final = "logprob_drift"


class DriftedLogprobsMasked:
    name: ClassVar[str] = "drifted_logprobs_masked"

    def check(self, observation: Observation) -> Verdict:
        rollouts = rollouts_to_judge(
            observation, self.name, raised="the step raised; no drifted logprob reached the trainer"
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        drifted = drifted_rows(observation.history.events())
        if not drifted:
            return not_judged(self.name, "no logprob_drift rule changed the logprobs of a row's answer")
        returned = {r.row_index: r for r in rollouts if r is not None}
        judged = [returned[row] for row in sorted(drifted) if row in returned]
        said = [r for r in judged if _weight_shown(r)]
        if not said:
            return not_judged(
                self.name,
                f"the logprobs of {_rows(sorted(drifted))} drifted, but the collector does not show their "
                "weight in the loss (no loss_mask): whether the trainer masks them is the trainer's to show",
            )
        problems = [problem for rollout in said if (problem := _problem(rollout)) is not None]
        if not problems:
            return verdict(
                self.name,
                Status.PASS,
                f"the drifted {_rows([r.row_index for r in said])} carry no weight in the train batch "
                "(left out, loss mask all zero, or aborted)",
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"{len(problems)} samples whose generation logprobs drifted from the model's are trained "
                    "on: the loss's importance ratio is taken against logprobs the policy never computed"
                ),
                expected=(
                    "a sample whose logprobs disagree with the policy's masked out of the loss (as NeMo RL's "
                    "seq_logprob_error_threshold does), left out of the train batch, or the step failed"
                ),
            ),
            problems,
        )


def drifted_rows(events: list[Event]) -> set[int]:
    """Rows whose answer a ``logprob_drift`` rule hit and changed (the fault layer's ``hook``)."""
    rows: set[int] = set()
    for event in events:
        data = event.data
        row = data.get("row")
        if (
            event.op == "hook"
            and data.get("effect") == DRIFT_EFFECT
            and isinstance(row, int)
            and not isinstance(row, bool)
            and "skipped" not in data
            and data.get("changed") != 0
        ):
            rows.add(row)
    return rows


def _weight_shown(rollout: Rollout) -> bool:
    """Aborted, left out of the train batch, or in it with the loss mask the trainer uses."""
    return rollout.status == "aborted" or rollout.in_train_batch is False or rollout.loss_mask is not None


def _problem(rollout: Rollout) -> str | None:
    if rollout.status == "aborted" or rollout.in_train_batch is False:
        return None
    mask = rollout.loss_mask or []
    if any(mask):
        weighted = sum(1 for flag in mask if flag)
        return (
            f"row {rollout.row_index} is in the train batch with drifted logprobs, its loss mask training "
            f"{weighted} of its {len(mask)} tokens"
        )
    return None


def _rows(indices: list[int]) -> str:
    return f"row {indices[0]}" if len(indices) == 1 else f"rows {', '.join(map(str, indices))}"
