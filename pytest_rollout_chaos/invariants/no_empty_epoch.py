"""``no_empty_epoch``: a batch with nothing to train on is never handed back; the collector raises.

NeMo RL #2305's "empty epochs": after an agent died, training went on over batches whose every
sample was a failure placeholder, and nothing stopped it. Isolating failed rows is right, but
when no row completed the batch as a whole is meaningless, whatever the aborted-share limit
says. So a returned list with no completed or truncated rollout fails, with the faults and
process exits that explain it; raising passes. So does one whose completed rollouts the collector
itself leaves out of the train batch (``in_train_batch`` False), every group dropped: the trainer
gets the same empty step.
"""

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


class NoEmptyEpoch:
    name: ClassVar[str] = "no_empty_epoch"

    def check(self, observation: Observation) -> Verdict:
        if not observation.rows:
            return not_judged(self.name, "no row was requested, so no batch could be empty")
        rollouts = rollouts_to_judge(
            observation, self.name, raised="the collector raised instead of handing back a batch"
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        present = [rollout for rollout in rollouts if rollout is not None]
        usable = [rollout for rollout in present if rollout.status != "aborted"]
        trained = [rollout for rollout in usable if rollout.in_train_batch is not False]
        if trained:
            trainable = f"{len(trained)} of {len(observation.rows)} rollouts can be trained on"
            return verdict(self.name, Status.PASS, trainable)
        if usable:
            return verdict(
                self.name,
                Status.FAIL,
                story(
                    observation,
                    what=(
                        f"an empty epoch: {len(usable)} of {len(observation.rows)} rows came back usable, "
                        "but the collector left every one of them out of the train batch and handed the "
                        "empty batch on"
                    ),
                    expected="an exception naming the cause when nothing of the batch is left to train on",
                ),
                [f"row {r.row_index}: {r.status}, in_train_batch=False" for r in usable[:6]],
            )
        reasons = Counter(rollout.error or "no reason given" for rollout in present).most_common(3)
        history = observation.history
        clues = [event for event in history if event.source in ("fault", "process")]
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"an empty epoch: none of {len(observation.rows)} requested rows came back usable "
                    f"({len(present)} aborted placeholders), and the collector handed the batch on"
                ),
                expected="an exception naming the cause when no row of the batch completed",
            ),
            [f"{count}x {reason}" for reason, count in reasons] + describe(clues[-6:], history),
        )
