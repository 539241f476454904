"""``train_batch_sound``: every sample the trainer would train on is a real generation of its row.

The train batch is what the collector says it hands to training (``Rollout.in_train_batch``);
where it does not say (None), every rollout that is not aborted, the convention the other
invariants judge by. Each sample in it must be a row that was requested, once, that did not come back
aborted (an aborted row in the batch is a placeholder whose fabricated reward, often 0, enters
the advantage baseline as if it were a trajectory), and, in gym style, whose row has a successful
``/run`` answer in the fault layer's record (a sample for a row no ``/run`` answered is nothing
the model generated for it). A raise hands the trainer nothing, which is judged and holds: the
step failed instead of training on a bad batch. An empty batch holds nothing to judge: NOT_JUDGED.
"""

from __future__ import annotations

from collections import Counter
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
        problems = [
            problem
            for rollout in batch
            if (problem := _problem(rollout, requested, counts[rollout.row_index], record)) is not None
        ]
        if not problems:
            checked = " against the record of /run answers" if record.style == "gym" else ""
            said = (
                "" if any(r.in_train_batch is not None for r in returned) else " (the rollouts not aborted)"
            )
            return verdict(
                self.name,
                Status.PASS,
                f"each of the {len(batch)} samples in the train batch{said} is a generated row of its own"
                f"{checked}",
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


def _problem(rollout: Rollout, requested: set[int], count: int, record: Served) -> str | None:
    index = rollout.row_index
    sample = f"row {index} is in the train batch with reward {rollout.reward}"
    if index not in requested:
        return f"{sample}, but no row {index} was requested"
    if count > 1:
        return f"{sample} {count} times: one row, several samples"
    if rollout.status == "aborted":
        reason = f" ({rollout.error})" if rollout.error else ""
        return f"{sample}, but it came back aborted{reason}: a placeholder counted as a sample"
    if record.style == "gym" and not any(call.succeeded for call in record.calls(index)):
        tried = "; ".join(call.describe() for call in record.calls(index)) or "no /run was recorded"
        return f"{sample}, but no /run of row {index} succeeded ({tried}): nothing generated it"
    return None
