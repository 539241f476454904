"""``train_batch_sound``: every sample the trainer would train on is a real generation of its row.

The train batch is what the collector says it hands to training (``Rollout.in_train_batch``);
where it does not say (None), every rollout that is not aborted, the convention the other
invariants judge by. Each sample in it must be a row that was requested, once, that did not come back
aborted (an aborted row in the batch is a placeholder whose fabricated reward, often 0, enters
the advantage baseline as if it were a trajectory), and, in gym style, whose row has a successful
``/run`` answer in the fault layer's record (a sample for a row no ``/run`` answered is nothing
the model generated for it). A raise hands the trainer nothing, which is judged and holds: the
step failed instead of training on a bad batch. An empty batch holds nothing to judge: NOT_JUDGED.

An aborted sample that cannot move the gradient is the one exception (SkyRL's placeholder at one
generation per prompt): the collector shows its loss mask all zero (``Rollout.loss_mask``), the
trainer's loss a mean over loss-mask tokens (``Rollout.loss_reduction.per_token``), so it adds to
neither the sum nor the divisor, and no other sample of its group (``generations_per_prompt``
consecutive rows) is in the batch, so its reward enters no sibling's baseline. Short of any of
the three it fails, saying which and naming the trainer's setting.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    not_judged,
    rollouts_to_judge,
    story,
    verdict,
)
from pytest_rollout_chaos.invariants.served import Served, served


class TrainBatchSound:
    name: ClassVar[str] = "train_batch_sound"

    def check(self, observation: Observation) -> Verdict:
        rollouts = rollouts_to_judge(
            observation, self.name, raised="the step raised; no train batch reached the trainer"
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        returned = [r for r in rollouts if r is not None]
        batch = [r for r in returned if _trained(r)]
        if not batch:
            return not_judged(
                self.name, "the train batch is empty: every rollout came back aborted or left out of training"
            )
        requested = set(observation.requested)
        counts = Counter(r.row_index for r in batch)
        record = served(observation.history)
        siblings = _siblings(observation.requested, observation.generations_per_prompt, batch)
        inert = [r for r in batch if r.status == "aborted" and not _movers(r, siblings[r.row_index])]
        problems = [
            problem
            for rollout in batch
            if (problem := _problem(rollout, requested, counts[rollout.row_index], record, siblings))
            is not None
        ]
        if not problems:
            checked = " against the record of /run answers" if record.style == "gym" else ""
            said = (
                "" if any(r.in_train_batch is not None for r in returned) else " (the rollouts not aborted)"
            )
            kept = (
                f"; the aborted {_rows([r.row_index for r in inert])} in it cannot move the gradient "
                f"(loss mask all zero, alone in the group, {'; '.join(sorted({_setting(r) for r in inert}))})"
                if inert
                else ""
            )
            generated = len(batch) - len(inert)
            return verdict(
                self.name,
                Status.PASS,
                f"each of the {generated} samples in the train batch{said} is a generated row of its own"
                f"{checked}{kept}",
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"{len(problems)} of the {len(batch)} samples in the train batch are no generation of "
                    "their row: the trainer would train on them, and their rewards enter the advantages"
                ),
                expected=(
                    "a failed row left out of the train batch (or the step failed), every sample in it a "
                    "row that was requested, generated and answered, once"
                ),
            ),
            problems,
        )


def _trained(rollout: Rollout) -> bool:
    """In the train batch: as the collector says, else when it is not aborted."""
    if rollout.in_train_batch is None:
        return rollout.status != "aborted"
    return rollout.in_train_batch


def _siblings(requested: Sequence[int], size: int, batch: Sequence[Rollout]) -> dict[int, list[int]]:
    """For each sample's row, the other rows of its group (``size`` consecutive requested rows)
    that are in the batch too."""
    trained = {r.row_index for r in batch}
    groups = [
        list(requested[start : start + max(size, 1)]) for start in range(0, len(requested), max(size, 1))
    ]
    return {
        index: [other for other in group if other != index and other in trained]
        for group in groups
        for index in group
    }


def _movers(rollout: Rollout, siblings: Sequence[int]) -> list[str]:
    """Why an aborted sample can move the gradient; empty when it cannot (module docstring)."""
    reasons = []
    mask = rollout.loss_mask
    if mask is None:
        reasons.append("the collector gives no loss mask to show it trains nothing")
    elif any(mask):
        reasons.append(f"its loss mask trains {sum(1 for flag in mask if flag)} of its {len(mask)} tokens")
    if siblings:
        reasons.append(
            f"its reward enters the advantage baseline of rows {siblings}, in its group and in the batch"
        )
    reduction = rollout.loss_reduction
    if reduction is None:
        reasons.append("the collector does not say how the trainer reduces the loss")
    elif not reduction.per_token:
        reasons.append(f"{reduction.setting} counts it in the loss's divisor, diluting every other sample")
    return reasons


def _rows(indices: Sequence[int]) -> str:
    return f"row {indices[0]}" if len(indices) == 1 else f"rows {', '.join(map(str, indices))}"


def _setting(rollout: Rollout) -> str:
    return rollout.loss_reduction.setting if rollout.loss_reduction is not None else ""


def _problem(
    rollout: Rollout, requested: set[int], count: int, record: Served, siblings: dict[int, list[int]]
) -> str | None:
    index = rollout.row_index
    sample = f"row {index} is in the train batch with reward {rollout.reward}"
    if index not in requested:
        return f"{sample}, but no row {index} was requested"
    if count > 1:
        return f"{sample} {count} times: one row, several samples"
    if rollout.status == "aborted":
        movers = _movers(rollout, siblings.get(index, []))
        if not movers:
            return None
        reason = f" ({rollout.error})" if rollout.error else ""
        placeholder = f"{sample}, but it came back aborted{reason}: a placeholder counted as a sample"
        if rollout.loss_mask is None and rollout.loss_reduction is None:
            return placeholder  # the collector claims nothing about its weight
        return f"{placeholder}; " + "; ".join(movers)
    if record.style == "gym" and not any(call.succeeded for call in record.calls(index)):
        tried = "; ".join(call.describe() for call in record.calls(index)) or "no /run was recorded"
        return f"{sample}, but no /run of row {index} succeeded ({tried}): nothing generated it"
    return None
