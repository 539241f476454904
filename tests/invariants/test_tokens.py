"""finite_logprobs and prefix_consistent on hand-built rollouts."""

from __future__ import annotations

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.finite_logprobs import FiniteLogprobs
from pytest_rollout_chaos.invariants.prefix_consistent import PrefixConsistent
from tests.invariants._builders import all_ok, observe, rollout, turns


def test_finite_logprobs_fails_on_nan_in_a_completed_rollout() -> None:
    history = History()
    history.append("fault", "info", "inject", {"fault": "nan_logprobs", "target": "model"})
    verdict = FiniteLogprobs().check(
        observe(2, [rollout(0), rollout(1, turns=turns(nan=True), attempts=3)], history=history)
    )
    assert verdict.status is Status.FAIL
    assert "non-finite logprobs reached the trainer in 1 rollouts" in verdict.summary
    assert "row 1 (completed, 3 attempts): non-finite logprob nan at turn 0, token 2" in verdict.evidence


def test_finite_logprobs_accepts_aborted_rows_and_raises() -> None:
    aborted = [rollout(0), rollout(1, "aborted", turns=turns(nan=True), error="nan after 3 attempts")]
    assert FiniteLogprobs().check(observe(2, aborted)).status is Status.PASS
    assert FiniteLogprobs().check(observe(2, None, raised=RuntimeError("x"))).status is Status.PASS
    assert FiniteLogprobs().check(observe(2, None)).status is Status.UNKNOWN


def test_finite_logprobs_fails_on_null() -> None:
    bad = turns()
    bad[1].generation_log_probs[0] = None  # type: ignore[call-overload]
    assert FiniteLogprobs().check(observe(1, [rollout(0, turns=bad)])).status is Status.FAIL


def test_prefix_consistent_fails_on_drift_passed_through() -> None:
    verdict = PrefixConsistent().check(observe(2, [rollout(0), rollout(1, turns=turns(drift=True))]))
    assert verdict.status is Status.FAIL
    assert "prefix drift passed through in 1 rollouts" in verdict.summary
    assert verdict.evidence[0].startswith("row 1: prefix mismatch at turn 1")


def test_prefix_consistent_passes_consistent_and_leaves_aborted_unjudged() -> None:
    assert PrefixConsistent().check(observe(3, all_ok(3))).status is Status.PASS
    aborted = [rollout(0, "aborted", turns=turns(drift=True), error="prefix mismatch at turn 1")]
    assert PrefixConsistent().check(observe(1, aborted)).status is Status.NOT_JUDGED
    assert PrefixConsistent().check(observe(1, None)).status is Status.UNKNOWN
