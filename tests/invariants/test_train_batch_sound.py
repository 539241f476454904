"""``train_batch_sound`` over hand-built rollouts: what a collector says it hands to training is held
to the rows requested and the fault layer's record of their ``/run`` answers."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

from pytest_rollout_chaos.collector.protocol import LossReduction, Rollout
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.train_batch_sound import TrainBatchSound
from tests.invariants._builders import observe, rollout
from tests.invariants._records import answered

CHECK = TrainBatchSound()


def trained(index: int, **kwargs: Any) -> Rollout:
    return replace(rollout(index, **kwargs), in_train_batch=True)


def placeholder(index: int) -> Rollout:
    """What slime #2078 makes of a crashed trajectory: aborted, reward 0, nothing to train on."""
    return Rollout(index, "aborted", 0.0, [], "slime isolated the crash", in_train_batch=True)


def test_a_batch_of_generated_rows_passes_and_failed_rows_left_out_are_fine() -> None:
    left_out = replace(rollout(1, status="aborted", turns=[], reward=0.0), in_train_batch=False)
    result = CHECK.check(observe(2, [trained(0), left_out], history=answered(2, failed=(1,))))
    assert result.status is Status.PASS
    assert result.summary == (
        "each of the 1 samples in the train batch is a generated row of its own against the record of "
        "/run answers"
    )


def test_a_placeholder_counted_as_a_sample_fails_naming_its_reward() -> None:
    result = CHECK.check(observe(2, [trained(0), placeholder(1)], history=answered(2, failed=(1,))))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1 is in the train batch with reward 0.0, but it came back aborted (slime isolated the crash): "
        "a placeholder counted as a sample",
    )
    assert "1 of the 2 samples in the train batch are no generation of their row" in result.summary


def test_a_completed_sample_for_a_row_no_run_answered_fails() -> None:
    result = CHECK.check(observe(2, [trained(0), trained(1, reward=0.0)], history=answered(2, failed=(1,))))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1 is in the train batch with reward 0.0, but no /run of row 1 succeeded (HTTP 500): nothing "
        "generated it",
    )


def test_a_row_twice_or_a_row_never_requested_fails() -> None:
    twice = CHECK.check(observe(2, [trained(0), trained(0)], history=answered(2)))
    assert twice.status is Status.FAIL
    assert twice.evidence[0] == (
        "row 0 is in the train batch with reward 1.0 2 times: one row, several samples"
    )
    stranger = CHECK.check(observe(1, [trained(0), trained(7)], history=answered(1)))
    assert stranger.status is Status.FAIL
    assert stranger.evidence == ("row 7 is in the train batch with reward 1.0, but no row 7 was requested",)


def test_without_a_record_the_batch_is_still_held_to_its_rows() -> None:
    assert CHECK.check(observe(1, [trained(0)])).status is Status.PASS
    assert CHECK.check(observe(1, [placeholder(0)])).status is Status.FAIL


def test_a_collector_that_does_not_say_trains_on_its_rollouts_not_aborted() -> None:
    silent = CHECK.check(
        observe(2, [rollout(0), rollout(1, status="aborted")], history=answered(2, failed=(1,)))
    )
    assert silent.status is Status.PASS
    assert "1 samples in the train batch (the rollouts not aborted)" in silent.summary
    made_up = CHECK.check(observe(2, [rollout(0), rollout(1, reward=0.0)], history=answered(2, failed=(1,))))
    assert made_up.status is Status.FAIL
    assert made_up.evidence[0].startswith("row 1 is in the train batch with reward 0.0, but no /run of row 1")


def test_a_raise_holds_and_an_empty_batch_is_not_judged() -> None:
    raised = CHECK.check(observe(2, None, raised=AttributeError("'list' object has no attribute 'x'")))
    assert raised.status is Status.PASS
    empty = CHECK.check(observe(2, [replace(rollout(0), in_train_batch=False), rollout(1, status="aborted")]))
    assert empty.status is Status.NOT_JUDGED
    assert empty.summary == (
        "the train batch is empty: every rollout came back aborted or left out of training"
    )
    assert CHECK.check(observe(1, None)).status is Status.UNKNOWN


# -- an aborted sample that cannot move the gradient (SkyRL's placeholder at one generation per prompt) --
TOKEN_MEAN = LossReduction(per_token=True, setting="trainer.algorithm.loss_reduction = 'token_mean'")
SEQUENCE_MEAN = LossReduction(per_token=False, setting="trainer.algorithm.loss_reduction = 'sequence_mean'")


def inert(
    index: int, *, mask: list[int] | None = None, reduction: LossReduction | None = TOKEN_MEAN
) -> Rollout:
    """SkyRL's placeholder: aborted, reward 0, one token whose loss mask is zero."""
    return replace(placeholder(index), loss_mask=[0] if mask is None else mask, loss_reduction=reduction)


def test_an_aborted_sample_with_no_loss_alone_in_its_group_under_a_token_mean_passes() -> None:
    result = CHECK.check(observe(2, [trained(0), inert(1)], history=answered(2, failed=(1,))))
    assert result.status is Status.PASS, result.evidence
    assert result.summary == (
        "each of the 1 samples in the train batch is a generated row of its own against the record of "
        "/run answers; the aborted row 1 in it cannot move the gradient (loss mask all zero, alone in the "
        "group, trainer.algorithm.loss_reduction = 'token_mean')"
    )


def test_an_aborted_sample_that_trains_tokens_fails_saying_how_many() -> None:
    result = CHECK.check(observe(2, [trained(0), inert(1, mask=[0, 1, 1])], history=answered(2, failed=(1,))))
    assert result.status is Status.FAIL
    [evidence] = result.evidence
    assert evidence.endswith("a placeholder counted as a sample; its loss mask trains 2 of its 3 tokens")


def test_an_aborted_sample_counted_by_a_sequence_mean_fails_naming_the_setting() -> None:
    result = CHECK.check(
        observe(2, [trained(0), inert(1, reduction=SEQUENCE_MEAN)], history=answered(2, failed=(1,)))
    )
    assert result.status is Status.FAIL
    assert result.evidence[0].endswith(
        "trainer.algorithm.loss_reduction = 'sequence_mean' counts it in the loss's divisor, diluting every "
        "other sample"
    )


def test_an_aborted_sample_among_its_groups_siblings_fails_naming_them() -> None:
    """Its zero reward enters GRPO's baseline of the siblings however inert its own tokens are."""
    grouped = dataclasses.replace(
        observe(4, [trained(0), inert(1), trained(2), trained(3)], history=answered(4, failed=(1,))),
        generations_per_prompt=2,
    )
    result = CHECK.check(grouped)
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1 is in the train batch with reward 0.0, but it came back aborted (slime isolated the crash): "
        "a placeholder counted as a sample; its reward enters the advantage baseline of rows [0], in its "
        "group and in the batch",
    )
    left_out = replace(trained(0), in_train_batch=False)
    alone = dataclasses.replace(grouped, rollouts=[left_out, inert(1), trained(2), trained(3)])
    assert CHECK.check(alone).status is Status.PASS


def test_an_aborted_sample_whose_collector_gives_only_a_mask_fails_for_the_reduction_unsaid() -> None:
    result = CHECK.check(observe(1, [inert(0, reduction=None)]))
    assert result.status is Status.FAIL
    assert result.evidence[0].endswith("the collector does not say how the trainer reduces the loss")
