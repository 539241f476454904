"""``prefix_consistent`` on hand-built rollouts: each turn's prompt starts with the turn before it,
prompt and generation, so drift is not passed through."""

from __future__ import annotations

from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.prefix_consistent import PrefixConsistent
from tests.invariants._builders import all_ok, observe, rollout, turns


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
