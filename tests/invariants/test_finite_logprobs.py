"""``finite_logprobs`` on hand-built rollouts: no NaN, infinite or null logprob reaches the trainer."""

from __future__ import annotations

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.finite_logprobs import FiniteLogprobs
from tests.invariants._builders import observe, rollout, turns


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
