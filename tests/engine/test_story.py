"""The failure story names the scenario and line, the schedule, the error and a hint matching its type."""

from __future__ import annotations

from pathlib import Path

from pytest_rollout_chaos.engine import story
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.errors import FaultError, InvariantViolation, ScenarioError, VacuousScenarioError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.scenario import load_scenario, parse_scenario

DATA = Path(__file__).parent.parent / "scenario" / "data"


def test_the_story_of_an_invariant_violation() -> None:
    scenario = load_scenario(DATA / "validation_slow_env.yaml", shown_as=Path("v.chaos.yaml"))
    text = story.tell(scenario, InvariantViolation("batched_env_eval: FAIL: 12 env.step calls, expected 2"))
    assert text.splitlines() == [
        "scenario 'validation-batched-env' failed (v.chaos.yaml:1)",
        "  Validation with a slow environment and two task groups still evaluates the environment per batch.",
        "  upstream: NVIDIA-NeMo/RL#1798, NVIDIA-NeMo/RL#2209",
        "",
        "fault schedule:",
        "  line 15: slow_env(delay_ms=100.5) on resources at start for 2.5s",
        "",
        "InvariantViolation:",
        "  batched_env_eval: FAIL: 12 env.step calls, expected 2",
        "",
        f"hint: {story.HINT_INVARIANT}",
    ]


def test_hints_follow_the_error_type() -> None:
    text = "name: b\ndescription: d\nexpect: {invariants: [bounded], witness: {multi_turn_rows: 2}}\n"
    scenario = parse_scenario(text, Path("b"))
    told = story.tell(scenario, FaultError("x"))
    assert "fault schedule: none (a baseline run)\nwitness: multi_turn_rows, at least 2" in told
    assert story.tell(scenario, FaultError("x")).endswith(story.HINT_FAULT)
    assert story.tell(scenario, ScenarioError("x")).endswith(story.HINT_SCENARIO)
    assert story.tell(scenario, VacuousScenarioError("x")).endswith(story.HINT_VACUOUS)
    assert story.tell(scenario, RuntimeError("")).splitlines()[-3:] == [
        "  (no message)",
        "",
        "hint: see the traceback",
    ]


def test_only_a_run_that_tested_nothing_is_no_verdict() -> None:
    text = "name: b\ndescription: d\nexpect: {invariants: [bounded], witness: {multi_turn_rows: 2}}\n"
    result = ScenarioResult(parse_scenario(text, Path("b")), rows=[], history=History())
    assert story.tested_nothing(result) is None  # nothing failed: a pass
    result.vacuous = ["multi_turn_rows: NOT_SEEN: 0 rows with two turns"]
    assert story.tested_nothing(result) == "vacuous: multi_turn_rows: NOT_SEEN: 0 rows with two turns"
    result.unacted = ["line 9: prefix_drift touched 0"]
    assert story.tested_nothing(result) == "fault touched nothing: line 9: prefix_drift touched 0"
    result.unacted = []
    result.expectation_failures = ["exactly rows [1] aborted; got rows []"]
    assert story.tested_nothing(result) is None  # a missed expectation is a verdict, never drawn again
    result.expectation_failures, result.fault_errors = [], [RuntimeError("heal failed")]
    assert story.tested_nothing(result) is None
    result.fault_errors, result.earlier_draws = [], ["vacuous: a", "vacuous: b"]
    assert story.earlier_draws_text(result).splitlines()[:3] == [
        "drawn 3 times (the policy samples irreproducibly); the earlier draws tested nothing:",
        "  draw 1: vacuous: a",
        "  draw 2: vacuous: b",
    ]
