"""The gate's decision: regressions and unmet --expect-fixed fail it; other changes are shown only."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos.gate import render
from pytest_rollout_chaos.gate.compare import compare
from pytest_rollout_chaos.gate.sides import SideRun
from pytest_rollout_chaos.gate.verdicts import ScenarioVerdicts, read_junit

PASS = {"accounted": "PASS", "no_silent_short_count": "PASS"}
FAIL = {"accounted": "FAIL", "no_silent_short_count": "FAIL"}


def _v(
    name: str, outcome: str, invariants: dict[str, str] | None = None, message: str = ""
) -> ScenarioVerdicts:
    return ScenarioVerdicts(name, outcome, invariants or {}, message)  # type: ignore[arg-type]


def test_a_fixed_scenario_passes_the_gate_and_names_the_flipped_invariants() -> None:
    base = {"short-results": _v("short-results", "failed", FAIL), "baseline": _v("baseline", "passed", PASS)}
    head = {"short-results": _v("short-results", "passed", PASS), "baseline": _v("baseline", "passed", PASS)}
    decision = compare(base, head, ["short-results"])
    assert decision.passed
    assert decision.exit_code == 0
    fixed = {s.name: s for s in decision.scenarios}["short-results"]
    assert fixed.change == "fixed"
    assert fixed.expected_fixed
    assert fixed.flipped == ("accounted FAIL→PASS", "no_silent_short_count FAIL→PASS")
    assert {s.name: s.change for s in decision.scenarios}["baseline"] == "same"


def test_swapping_base_and_head_is_a_regression_and_an_unmet_expectation() -> None:
    good = {"short-results": _v("short-results", "passed", PASS)}
    bad = {
        "short-results": _v("short-results", "failed", FAIL, "no_silent_short_count: 2 rows missing\nmore")
    }
    decision = compare(good, bad, ["short-results"])
    assert decision.exit_code == 1
    assert decision.failures == (
        "short-results: regression: passed on base, failed on head (no_silent_short_count: 2 rows missing)",
        "short-results: expected fixed, but on base it passed, not red; on head it failed "
        "(no_silent_short_count: 2 rows missing), not passed",
    )


def test_an_expected_fix_that_is_green_on_both_sides_fails_the_gate() -> None:
    both = {"x": _v("x", "passed")}
    assert compare(both, both, ["x"]).failures == ("x: expected fixed, but on base it passed, not red",)
    assert compare(both, both, ["y"]).failures == (
        "y: --expect-fixed names a scenario that ran on neither side",
    )


@pytest.mark.parametrize(
    ("base", "head", "change"),
    [
        ("passed", "skipped", "changed"),
        ("failed", "error", "changed"),
        ("error", "passed", "fixed"),
        ("passed", "error", "regression"),
        ("skipped", "skipped", "same"),
    ],
)
def test_only_passed_to_red_is_a_regression(base: str, head: str, change: str) -> None:
    decision = compare({"x": _v("x", base)}, {"x": _v("x", head)})
    assert decision.scenarios[0].change == change
    assert decision.passed is (change != "regression")


def test_red_on_both_sides_for_other_invariants_is_shown_as_changed() -> None:
    decision = compare(
        {"x": _v("x", "failed", {"accounted": "FAIL", "bounded": "PASS"})},
        {"x": _v("x", "failed", {"accounted": "PASS", "bounded": "FAIL"})},
    )
    assert decision.passed
    assert decision.scenarios[0].change == "changed"
    assert decision.scenarios[0].flipped == ("accounted FAIL→PASS", "bounded PASS→FAIL")


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
 <testcase classname="scenarios.short-results.chaos.yaml" name="short-results" time="3.1">
  <properties><property name="scenario" value="short-results"/><property name="outcome" value="raised"/>
   <property name="invariant:accounted" value="FAIL"/>
   <property name="invariant:bounded" value="PASS"/></properties>
  <failure message="scenario 'short-results' failed">scenario 'short-results' failed (x.chaos.yaml:1)
  The Gym client yields fewer results than rows were requested.

InvariantViolation:
  outcome: the collector returned 6 rollouts for 6 rows (2 None, 4 completed) after 0.34s
  expected:
    the collector to raise Exception, but it returned 6 rollouts
  invariants:
    accounted: FAIL: rows [4, 5] have no rollout (lost)
  timeline (faults, process exits, collection):
    t=  0.022s fault info inject (fault='short_results')</failure></testcase>
 <testcase classname="scenarios.baseline.chaos.yaml" name="baseline" time="2.0">
  <properties><property name="scenario" value="baseline"/>
   <property name="invariant:accounted" value="PASS"/></properties>
 </testcase>
 <testcase classname="scenarios.native.chaos.yaml" name="native-train" time="0.0">
  <skipped message="/x/engine/run.py:170: native-style scenario; the collector supports only gym style"/>
 </testcase>
 <testcase classname="tests.test_x" name="test_y[1]" time="0.0"/>
</testsuite></testsuites>
"""


def test_verdicts_are_read_back_from_the_junit_xml(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    verdicts = read_junit(path)
    assert set(verdicts) == {"short-results", "baseline", "native-train"}
    assert verdicts["short-results"].outcome == "failed"
    assert verdicts["short-results"].invariants == {"accounted": "FAIL", "bounded": "PASS"}
    assert verdicts["short-results"].message == (
        "expected the collector to raise Exception, but it returned 6 rollouts; "
        "accounted: FAIL: rows [4, 5] have no rollout (lost)"
    )
    assert verdicts["baseline"].outcome == "passed"
    assert verdicts["native-train"].outcome == "skipped"
    assert verdicts["native-train"].message.startswith("native-style scenario")


def test_the_markdown_leads_with_the_decision_and_folds_what_did_not_change(tmp_path: Path) -> None:
    base = {"short-results": _v("short-results", "failed", FAIL), "baseline": _v("baseline", "passed", PASS)}
    head = {"short-results": _v("short-results", "passed", PASS), "baseline": _v("baseline", "passed", PASS)}
    decision = compare(base, head, ["short-results"])
    sides = (SideRun("base", tmp_path / "rl-old", wall_s=61), SideRun("head", tmp_path / "rl-new", wall_s=58))
    comment = render.markdown(decision, *sides, target="nemo_rl")
    assert comment.splitlines()[0] == "### ✅ rollout-chaos gate (`nemo_rl`): PASS: 1 fixed, 1 same"
    assert "| `short-results` | FAILED | passed | fixed (expected) | accounted FAIL→PASS," in comment
    assert "<details><summary>1 scenario(s) unchanged</summary>" in comment
    table = render.text(decision, *sides)
    assert table.splitlines()[0].split() == [
        "scenario",
        "base",
        "head",
        "change",
        "invariants",
        "that",
        "flipped",
    ]
    assert table.splitlines()[-1] == "gate PASS: 1 fixed, 1 same"
