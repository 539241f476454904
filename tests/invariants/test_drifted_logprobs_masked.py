"""``drifted_logprobs_masked`` over hand-built rollouts and the fault layer's ``logprob_drift`` hits."""

from __future__ import annotations

from dataclasses import replace

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.drifted_logprobs_masked import DriftedLogprobsMasked
from tests.invariants._builders import observe, rollout

CHECK = DriftedLogprobsMasked()


def drifted(*rows: int, changed: int = 3) -> History:
    history = History()
    for row in rows:
        history.append(
            "agent",
            "info",
            "hook",
            {
                "link": "collector->agent",
                "effect": "logprob_drift",
                "row": row,
                "drift_nats": 1.0,
                "changed": changed,
            },
        )
    return history


def sample(index: int, mask: list[int] | None, *, trained: bool | None = True) -> Rollout:
    return replace(rollout(index), in_train_batch=trained, loss_mask=mask)


def test_a_drifted_row_masked_out_of_the_loss_passes() -> None:
    result = CHECK.check(observe(2, [sample(0, [1, 1]), sample(1, [0, 0])], history=drifted(1)))
    assert result.status is Status.PASS
    assert "the drifted row 1 carry no weight" in result.summary


def test_a_drifted_row_left_out_or_aborted_passes() -> None:
    left_out = sample(1, None, trained=False)
    assert CHECK.check(observe(2, [sample(0, [1]), left_out], history=drifted(1))).status is Status.PASS
    aborted = replace(rollout(1, status="aborted", turns=[]), in_train_batch=True)
    assert CHECK.check(observe(2, [sample(0, [1]), aborted], history=drifted(1))).status is Status.PASS


def test_a_drifted_row_trained_with_its_loss_mask_fails_naming_it() -> None:
    result = CHECK.check(observe(2, [sample(0, [1, 1]), sample(1, [1, 0, 1])], history=drifted(1)))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1 is in the train batch with drifted logprobs, its loss mask training 2 of its 3 tokens",
    )


def test_no_loss_mask_no_drift_or_a_drift_that_changed_nothing_is_not_judged() -> None:
    reference = [replace(rollout(0), in_train_batch=True), replace(rollout(1), in_train_batch=True)]
    assert CHECK.check(observe(2, reference, history=drifted(1))).status is Status.NOT_JUDGED
    masked = [sample(0, [1]), sample(1, [1])]
    assert CHECK.check(observe(2, masked, history=History())).status is Status.NOT_JUDGED
    assert CHECK.check(observe(2, masked, history=drifted(1, changed=0))).status is Status.NOT_JUDGED


def test_a_raise_holds() -> None:
    result = CHECK.check(observe(2, None, history=drifted(1), raised=RuntimeError("step failed")))
    assert result.status is Status.PASS
