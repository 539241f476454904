"""The gate's decision: regressions (a skip on head included) and unmet --expect-fixed fail it; what
cannot be judged (red on base and skipped on head, a trainer module missing) keeps it from passing;
other changes are shown only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast
from xml.sax.saxutils import escape

import pytest

from pytest_rollout_chaos.collector import contract
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.collector.protocol import Collector, CollectorContext
from pytest_rollout_chaos.gate import render
from pytest_rollout_chaos.gate.compare import compare, moved
from pytest_rollout_chaos.gate.sides import SideRun
from pytest_rollout_chaos.gate.verdicts import MissingModule, ScenarioVerdicts, read_junit

PASS = {"accounted": "PASS", "no_silent_short_count": "PASS"}
TOO_LITTLE = (
    "not judged: only {judged} of the {reached} scenarios the sides ran were judged (passed or red) on both; "
    "fewer than half is too little to pass a gate on"
)
FAIL = {"accounted": "FAIL", "no_silent_short_count": "FAIL"}


def _v(
    name: str,
    outcome: str,
    invariants: dict[str, str] | None = None,
    message: str = "",
    missing: MissingModule | None = None,
) -> ScenarioVerdicts:
    return ScenarioVerdicts(name, outcome, invariants or {}, message, missing)  # type: ignore[arg-type]


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
    assert {s.name: s.change for s in decision.scenarios}["baseline"] == "passed on both"


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
    ("base", "head", "change", "exit_code"),
    [
        ("passed", "skipped", "regression", 1),
        ("passed", None, "regression", 1),
        ("failed", "error", "changed", 0),
        ("error", "passed", "fixed", 0),
        ("passed", "error", "regression", 1),
        ("failed", "skipped", "not judged", 2),
        ("error", None, "not judged", 2),
        ("skipped", "skipped", "skipped on both", 0),
        ("skipped", None, "base only", 0),
        (None, "failed", "head only", 2),  # nothing judged on both sides: no PASS on nothing
    ],
)
def test_passed_to_red_skipped_or_missing_is_a_regression_and_red_to_skipped_is_not_judged(
    base: str | None, head: str | None, change: str, exit_code: int
) -> None:
    decision = compare(
        {"x": _v("x", base)} if base else {},
        {"x": _v("x", head)} if head else {},
    )
    assert decision.scenarios[0].change == change
    assert decision.exit_code == exit_code
    assert decision.passed is (exit_code == 0)


def test_a_skip_is_not_a_fix() -> None:
    base = {"x": _v("x", "passed"), "y": _v("y", "failed", FAIL), "z": _v("z", "passed")}
    head = {"x": _v("x", "skipped", message="native-style scenario; gym only"), "y": _v("y", "skipped")}
    decision = compare(base, head)
    assert decision.exit_code == 1  # a regression outranks what was not judged
    assert decision.failures == (
        "x: regression: passed on base, skipped on head (native-style scenario; gym only); a skip is "
        "not a fix (if head means to stop running it: --allow-skip x)",
        "z: regression: passed on base, did not run on head; a skip is not a fix "
        "(if head means to stop running it: --allow-skip z)",
    )
    assert decision.not_judged == (
        "y: not judged: failed on base, skipped on head; a skip is not a fix",
        TOO_LITTLE.format(judged=0, reached=3),
    )
    assert render.summary(decision) == "gate FAIL: 2 regression, 1 not judged; 0 of 3 judged on both sides"

    allowed = compare(base, head, allow_skip=["x", "z"])
    assert {s.name: s.change for s in allowed.scenarios} == {
        "x": "skip allowed",
        "y": "not judged",
        "z": "skip allowed",
    }
    assert allowed.failures == ()
    assert allowed.exit_code == 2
    assert allowed.verdict == "NOT JUDGED"
    assert (
        render.summary(allowed)
        == "gate NOT JUDGED: 1 not judged, 2 skip allowed; 0 of 3 judged on both sides"
    )


def test_an_expected_fix_that_head_skips_is_unmet() -> None:
    decision = compare({"x": _v("x", "failed", FAIL)}, {"x": _v("x", "skipped")}, ["x"])
    assert decision.scenarios[0].change == "not judged"
    assert decision.failures == ("x: expected fixed, but on head it skipped, not passed",)
    assert decision.exit_code == 1


MEGATRON = MissingModule("megatron", "pip install megatron-core")


def test_a_side_that_cannot_import_the_trainer_is_not_judged_naming_the_module() -> None:
    """Red on both sides for a missing module used to read "same", and green on base then red on
    head a regression of the trainer; neither says anything about the trainer."""
    base = {
        "x": _v("x", "passed", PASS),
        "y": _v("y", "failed", FAIL, missing=MissingModule("megatron")),
        "z": _v("z", "failed", FAIL),
    }
    head = {
        "x": _v("x", "failed", FAIL, missing=MEGATRON),
        "y": _v("y", "failed", FAIL, missing=MEGATRON),
        "z": _v("z", "passed", PASS, missing=MEGATRON),
    }
    decision = compare(base, head, expect_fixed=["z"])
    assert [s.change for s in decision.scenarios] == ["not judged"] * 3
    assert decision.failures == ()
    assert decision.exit_code == 2
    assert decision.not_judged == (
        "base: not judged: the trainer could not be imported in 1 scenario(s) (y): module 'megatron' is "
        "missing; install it with: pip install the package that provides 'megatron' into the trainer's "
        "environment (the gate's --python)",
        "head: not judged: the trainer could not be imported in 3 scenario(s) (x, y, z): module "
        "'megatron' is missing; install it with: pip install megatron-core",
        TOO_LITTLE.format(judged=0, reached=3),
    )
    table = render.text(decision, SideRun("base", Path("a")), SideRun("head", Path("b")))
    assert "  head: not judged: the trainer could not be imported in 3 scenario(s)" in table
    assert table.splitlines()[-1] == "gate NOT JUDGED: 3 not judged; 0 of 3 judged on both sides"


def test_passing_on_head_without_judging_what_failed_on_base_is_not_a_fix() -> None:
    base = {"one-row-hangs": _v("one-row-hangs", "failed", {"rewards_recorded": "FAIL", "accounted": "PASS"})}
    judged_nothing = {"rewards_recorded": "NOT_JUDGED", "accounted": "PASS"}
    head = {"one-row-hangs": _v("one-row-hangs", "passed", judged_nothing)}
    decision = compare(base, head, ["one-row-hangs"])
    assert decision.exit_code == 2
    [scenario] = decision.scenarios
    assert scenario.change == "not judged"
    assert scenario.flipped == ("rewards_recorded FAIL→NOT_JUDGED",)
    assert decision.not_judged == (
        "one-row-hangs: not judged: failed on base, passed on head without judging what failed on base "
        "(rewards_recorded NOT_JUDGED on head); a pass that judged nothing is not a fix",
    )
    assert not decision.failures


def test_a_fix_that_stops_the_raise_is_a_fix_when_what_failed_beside_it_now_passes() -> None:
    """slime's PR #2078: base raised the batch for one row (isolated_failures and raise_has_cause
    FAIL); head isolates the row, so there is no raise left for raise_has_cause to judge."""
    against = {"isolated_failures": "FAIL", "raise_has_cause": "FAIL"}
    base = {"one-row-raises": _v("one-row-raises", "failed", against)}
    isolated = {"isolated_failures": "PASS", "raise_has_cause": "NOT_JUDGED"}
    head = {"one-row-raises": _v("one-row-raises", "passed", isolated)}
    decision = compare(base, head, ["one-row-raises"])
    [scenario] = decision.scenarios
    assert scenario.change == "fixed"
    assert decision.exit_code == 0
    assert not decision.not_judged


def test_not_judged_on_one_side_is_a_change_shown_never_a_pass() -> None:
    base = {"baseline": _v("baseline", "passed", {"prefix_consistent": "PASS"})}
    head = {"baseline": _v("baseline", "passed", {"prefix_consistent": "NOT_JUDGED"})}
    decision = compare(base, head)
    assert decision.exit_code == 0
    [scenario] = decision.scenarios
    assert (scenario.change, scenario.flipped) == ("changed", ("prefix_consistent PASS→NOT_JUDGED",))


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


VACUOUS_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
 <testcase classname="scenarios.retokenization-drift.chaos.yaml" name="retokenization-drift" time="1.0">
  <properties><property name="scenario" value="retokenization-drift"/>
   <property name="invariant:prefix_consistent" value="NOT_JUDGED"/>
   <property name="witness:prompt_ids_drifted" value="NOT_SEEN 0"/></properties>
  <failure message="scenario 'retokenization-drift' failed">scenario 'retokenization-drift' failed (x:1)

VacuousScenarioError:
  outcome: the collector returned 16 rollouts for 16 rows (16 completed) after 0.80s

  not judged (the scenario tested nothing there):
    prefix_consistent: NOT_JUDGED: no returned rollout has two turns or more
    prompt_ids_drifted: NOT_SEEN: 0 rows whose prompt ids drifted between turns, at least 1 needed
</failure></testcase>
</testsuite></testsuites>
"""


def test_a_vacuous_scenario_reads_back_as_red_naming_what_was_not_judged(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(VACUOUS_JUNIT)
    [verdicts] = read_junit(path).values()
    assert verdicts.outcome == "failed"
    assert verdicts.invariants == {"prefix_consistent": "NOT_JUDGED"}
    assert verdicts.message == (
        "prefix_consistent: NOT_JUDGED: no returned rollout has two turns or more; "
        "prompt_ids_drifted: NOT_SEEN: 0 rows whose prompt ids drifted between turns, at least 1 needed"
    )


def test_the_markdown_leads_with_the_decision_and_folds_what_did_not_change(tmp_path: Path) -> None:
    base = {"short-results": _v("short-results", "failed", FAIL), "baseline": _v("baseline", "passed", PASS)}
    head = {"short-results": _v("short-results", "passed", PASS), "baseline": _v("baseline", "passed", PASS)}
    decision = compare(base, head, ["short-results"])
    sides = (SideRun("base", tmp_path / "rl-old", wall_s=61), SideRun("head", tmp_path / "rl-new", wall_s=58))
    comment = render.markdown(decision, *sides, target="nemo_rl")
    assert comment.splitlines()[0] == (
        "### ✅ rollout-chaos gate (`nemo_rl`): PASS: 1 fixed, 1 passed on both; 2 of 2 judged on both sides"
    )
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
    assert table.splitlines()[-1] == "gate PASS: 1 fixed, 1 passed on both; 2 of 2 judged on both sides"


def _raised(call: Callable[[], object]) -> str:
    try:
        call()
    except Exception as error:
        return str(error)
    raise AssertionError(f"{call} did not raise")


def _missing_factory(ctx: CollectorContext) -> Collector:
    import rollout_chaos_no_such_module  # type: ignore[import-not-found]  # noqa: F401

    raise AssertionError("unreachable: the import above raises")


def test_a_missing_trainer_module_is_read_from_any_of_the_three_ways_a_scenario_reports_it(
    tmp_path: Path,
) -> None:
    """The factory raising (a contract error), the collector raising (the outcome), an adapter's
    import check (with its install line): each message as the real code writes it."""
    factory_raised = _raised(
        lambda: contract.build_collector(_missing_factory, cast(CollectorContext, None), who="collector 'x'")
    )
    adapter = _raised(
        Upstream("nemo_rl", ("rollout_chaos_no_such_adapter_module",), "pip install a-b").require
    )
    cases = [
        (
            "by-factory",
            "",
            f"<failure>scenario failed\n\nCollectorContractError:\n  {escape(factory_raised)}</failure>",
        ),
        (
            "by-collect",
            "the collector raised ModuleNotFoundError: No module named 'megatron.core'",
            "<failure>scenario failed</failure>",
        ),
        (
            "by-adapter",
            f"the collector raised CollectorTargetError: {escape(adapter)}",
            "<failure>x</failure>",
        ),
        ("unrelated", "the collector returned 4 rollouts for 4 rows (4 completed)", ""),
    ]
    path = tmp_path / "junit.xml"
    path.write_text(
        "<testsuites><testsuite>"
        + "".join(
            f'<testcase name="{name}"><properties><property name="scenario" value="{name}"/>'
            f'<property name="outcome" value="{outcome}"/></properties>{body}</testcase>'
            for name, outcome, body in cases
        )
        + "</testsuite></testsuites>"
    )
    verdicts = read_junit(path)
    assert verdicts["by-factory"].missing == MissingModule("rollout_chaos_no_such_module")
    assert verdicts["by-collect"].missing == MissingModule("megatron.core")
    assert verdicts["by-adapter"].missing == MissingModule(
        "rollout_chaos_no_such_adapter_module", "pip install a-b"
    )
    assert verdicts["unrelated"].missing is None


def test_a_move_counts_only_when_every_rerun_shows_it_and_is_unstable_otherwise() -> None:
    """slime#2078's policy-503-storm moved only where the 503s fell: with other seeds it does not
    move again, so it is unstable (listed, failing nothing); a move every run shows stays."""
    green = _v("baseline", "passed", PASS)
    first = (
        {"baseline": green, "storm": _v("storm", "passed", PASS), "drop": _v("drop", "passed", PASS)},
        {"baseline": green, "storm": _v("storm", "failed", FAIL), "drop": _v("drop", "failed", FAIL)},
    )
    again = (
        {"storm": _v("storm", "failed", FAIL), "drop": _v("drop", "passed", PASS)},
        {"storm": _v("storm", "failed", FAIL), "drop": _v("drop", "failed", FAIL)},
    )
    assert moved(compare(*first)) == ["drop", "storm"]
    decision = compare(*first, reruns=[again, again])
    changes = {s.name: (s.change, s.runs) for s in decision.scenarios}
    assert changes["drop"] == ("regression", ("regression", "regression", "regression"))
    assert changes["storm"] == ("unstable", ("regression", "failed on both", "failed on both"))
    assert decision.failures == ("drop: regression: passed on base, failed on head",)
    assert decision.unstable == (
        "storm: unstable over 3 runs (run 1: regression, run 2: failed on both, run 3: failed on both)",
    )
    assert render.summary(decision) == (
        "gate FAIL: 1 regression, 1 unstable, 1 passed on both; 3 of 3 judged on both sides"
    )
    table = render.text(decision, SideRun("base", Path("a")), SideRun("head", Path("b")))
    assert "UNSTABLE (moved in some runs only; neither fixed nor regressed):" in table

    # An expected fix that holds in only some runs is not shown to be a fix: not judged.
    fixed = compare(first[1], first[0], ["storm"], reruns=[(again[1], again[0])])
    assert {s.name: s.change for s in fixed.scenarios}["storm"] == "unstable"
    assert fixed.not_judged == (
        "storm: expected fixed, but the move held in only some runs (run 1: fixed, run 2: failed on both)",
    )
    assert fixed.exit_code == 2


def test_no_pass_when_baseline_is_not_green_on_both_sides() -> None:
    """SkyRL #1986 with its flag off: baseline red on both sides (vacuous), one scenario passed."""
    vacuous = _v(
        "baseline", "failed", {"prefix_consistent": "NOT_JUDGED"}, "prefix_consistent: NOT_JUDGED: x"
    )
    base = {"baseline": vacuous, "x": _v("x", "passed", PASS)}
    decision = compare(base, dict(base))
    assert decision.failures == ()
    assert decision.exit_code == 2
    assert decision.not_judged == (
        "baseline: not judged: it must pass on both sides for any verdict to mean something, but it "
        "failed (prefix_consistent: NOT_JUDGED: x) on base and failed (prefix_consistent: NOT_JUDGED: x) "
        "on head",
    )
    assert [s.change for s in decision.scenarios] == ["failed on both", "passed on both"]


def test_fewer_than_half_judged_is_not_a_pass_and_skips_on_both_sides_do_not_count() -> None:
    green = _v("baseline", "passed", PASS)
    skipped = {f"s{at}": _v(f"s{at}", "skipped", message="not reached") for at in range(30)}
    base = {"baseline": green, **skipped, "x": _v("x", "failed", FAIL), "y": _v("y", "passed", PASS)}
    decision = compare(base, dict(base))
    assert (decision.judged, decision.reached, decision.exit_code) == (3, 3, 0)
    assert decision.count("skipped on both") == 30
    red_on_base = {**base, "y": _v("y", "failed", FAIL), "x": _v("x", "failed", FAIL)}
    unreached = {**base, "x": _v("x", "skipped"), "y": _v("y", "skipped")}
    half = compare(red_on_base, unreached)
    assert (half.judged, half.reached) == (1, 3)
    assert TOO_LITTLE.format(judged=1, reached=3) in half.not_judged


NOT_JUDGED_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
 <testcase classname="scenarios.short-results.chaos.yaml" name="short-results" time="1.0">
  <properties><property name="scenario" value="short-results"/></properties>
  <skipped type="pytest.skip" message="NOT_JUDGED: grpo_train changed since the adapter's copy \
(nemo_rl/algorithms/grpo.py:1402)">/x/engine/run.py:90: NOT_JUDGED: grpo_train changed since the \
adapter's copy (nemo_rl/algorithms/grpo.py:1402)</skipped>
 </testcase>
</testsuite></testsuites>
"""


def test_a_scenario_the_collector_declines_is_neither_fixed_nor_regressed(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(NOT_JUDGED_JUNIT)
    [declined] = read_junit(path).values()
    assert declined.outcome == "not_judged"
    assert declined.message == "grpo_train changed since the adapter's copy (nemo_rl/algorithms/grpo.py:1402)"
    green = _v("baseline", "passed", PASS)
    base = {"baseline": green, "short-results": _v("short-results", "failed", FAIL)}
    head = {"baseline": green, "short-results": declined}
    decision = compare(base, head, ["short-results"])
    [_, scenario] = decision.scenarios
    assert scenario.change == "not judged"
    assert decision.failures == ()  # not an unmet fix: it was not judged
    assert decision.not_judged == (
        "short-results: not judged, neither fixed nor regressed (head: grpo_train changed since the "
        "adapter's copy (nemo_rl/algorithms/grpo.py:1402))",
    )
    assert decision.exit_code == 2
    table = render.text(decision, SideRun("base", Path("a")), SideRun("head", Path("b")))
    assert "short-results  FAILED  NOT JUDGED  not judged (expected)" in table
