"""compose: a crashing checker is UNKNOWN, never PASS; worst wins, and NOT_JUDGED never wins over PASS."""

from __future__ import annotations

from typing import ClassVar

import pytest

from pytest_rollout_chaos.errors import InvariantViolation
from pytest_rollout_chaos.invariants import (
    Observation,
    Status,
    Verdict,
    assert_all_pass,
    check_all,
    worst,
)
from tests._invariant_names import INTERFACE_NAMES
from tests.invariants._builders import all_ok, observe, rollout


class _Crashing:
    name: ClassVar[str] = "crashing"

    def check(self, observation: Observation) -> Verdict:
        raise ZeroDivisionError("checker bug")


class _NotAVerdict:
    name: ClassVar[str] = "sloppy"

    def check(self, observation: Observation) -> Verdict:
        return "PASS"  # type: ignore[return-value]


def test_a_crashing_checker_is_unknown_with_its_traceback() -> None:
    verdicts = check_all(observe(2, all_ok(2)), [_Crashing(), "accounted"])
    crashed, accounted = verdicts
    assert crashed.status is Status.UNKNOWN
    assert "checker crashed (ZeroDivisionError: checker bug)" in crashed.summary
    assert any("ZeroDivisionError" in line for line in crashed.evidence)
    assert any("Traceback" in line for line in crashed.evidence)
    assert accounted.status is Status.PASS
    assert worst(verdicts) is Status.UNKNOWN


def test_a_checker_returning_garbage_is_unknown() -> None:
    [verdict] = check_all(observe(1, all_ok(1)), [_NotAVerdict()])
    assert verdict.status is Status.UNKNOWN


def test_worst_wins_and_nothing_judged_is_unknown() -> None:
    verdicts = check_all(observe(2, [rollout(0)]))
    assert worst(verdicts) is Status.FAIL
    assert worst([]) is Status.UNKNOWN
    assert len(verdicts) == len(INTERFACE_NAMES)


def test_assert_all_pass_lists_every_failing_verdict() -> None:
    verdicts = check_all(
        observe(3, [rollout(0), rollout(0)]), ["accounted", "no_silent_short_count", "bounded"]
    )
    with pytest.raises(InvariantViolation) as caught:
        assert_all_pass(verdicts)
    text = str(caught.value)
    assert "accounted: FAIL" in text
    assert "no_silent_short_count: FAIL" in text
    assert "bounded" not in text
    assert_all_pass(check_all(observe(2, all_ok(2)), ["accounted", "bounded"]))
    with pytest.raises(InvariantViolation, match="crashing: UNKNOWN"):
        assert_all_pass(check_all(observe(1, all_ok(1)), [_Crashing()]))
    assert_all_pass(check_all(observe(1, all_ok(1)), [_Crashing()]), allow_unknown=True)


def test_assert_all_pass_fails_an_invariant_that_judged_nothing_unless_allowed() -> None:
    verdicts = check_all(observe(2, all_ok(2)), ["accounted", "isolated_failures"])
    with pytest.raises(InvariantViolation, match="isolated_failures: NOT_JUDGED: no trajectory failed"):
        assert_all_pass(verdicts)
    assert_all_pass(verdicts, allow_not_judged=True)


def test_not_judged_is_never_the_best_of_a_merge() -> None:
    not_judged = Status("NOT_JUDGED")
    verdicts = [Verdict("a", Status.PASS, ""), Verdict("b", not_judged, "")]
    assert worst(verdicts) is not_judged
    assert worst([*verdicts, Verdict("c", Status.UNKNOWN, "")]) is Status.UNKNOWN
    assert worst([*verdicts, Verdict("c", Status.FAIL, "")]) is Status.FAIL
