"""``no_empty_epoch`` on hand-built outcomes: a batch handed back holds at least one usable row."""

from __future__ import annotations

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.no_empty_epoch import NoEmptyEpoch
from tests.invariants._builders import observe, rollout


def test_no_empty_epoch_fails_a_returned_batch_of_only_placeholders() -> None:
    history = History()
    history.append("fault", "info", "inject", {"fault": "down", "target": "agent->resources"})
    placeholders = [rollout(i, "aborted", turns=[], error="agent->resources down") for i in range(3)]
    verdict = NoEmptyEpoch().check(observe(3, placeholders, history=history))
    assert verdict.status is Status.FAIL
    assert (
        "an empty epoch: none of 3 requested rows came back usable (3 aborted placeholders)"
        in verdict.summary
    )
    assert verdict.evidence[0] == "3x agent->resources down"
    assert "inject" in verdict.evidence[1]


def test_no_empty_epoch_passes_one_usable_row_or_a_raise() -> None:
    mixed = [rollout(0, "aborted", error="x"), rollout(1, "truncated")]
    assert NoEmptyEpoch().check(observe(2, mixed)).status is Status.PASS
    assert NoEmptyEpoch().check(observe(2, None, raised=RuntimeError("down"))).status is Status.PASS
    assert NoEmptyEpoch().check(observe(2, [])).status is Status.FAIL


def test_no_empty_epoch_fails_usable_rows_all_left_out_of_the_train_batch() -> None:
    """Every group dropped is the same empty step for the trainer as every row aborted."""
    left_out = [rollout(i, in_train_batch=False) for i in range(3)]
    verdict = NoEmptyEpoch().check(observe(3, left_out))
    assert verdict.status is Status.FAIL
    assert "3 of 3 rows came back usable, but the collector left every one of them out" in verdict.summary
    assert verdict.evidence[0] == "row 0: completed, in_train_batch=False"
    one_trained = [*left_out[:2], rollout(2, in_train_batch=True)]
    assert NoEmptyEpoch().check(observe(3, one_trained)).status is Status.PASS
