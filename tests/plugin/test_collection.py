"""Collection of ``*.chaos.yaml``: only with --rollout-chaos, validated at collection, markers from
tags, the YAML line as location, and failures told as stories."""

from __future__ import annotations

import textwrap
from xml.etree import ElementTree

import pytest

GOOD = """\
name: {name}
description: A model link that gets slow; everything still completes.
tags: [{tag}, network]
upstream: ["NVIDIA-NeMo/Gym#1787"]
faults:
  - kind: latency
    target: agent->model
    at: {{after_completed: 1}}
    latency_ms: 200
expect:
  rollouts: {{all_completed: true}}
  invariants: [accounted, bounded]
"""

BROKEN = """\
name: broken
description: has a typo in its fault kind
faults:
  - kind: latncy
    target: agent->model
expect:
  invariants: [accounted]
"""

# Replaces the runner so the items run without servers: the scenario name picks the outcome.
RUNNER_CONFTEST = """
import pytest
from pytest_rollout_chaos.errors import FaultError, InvariantViolation

@pytest.fixture
def chaos_scenario_runner():
    def run(scenario, request):
        assert request.getfixturevalue("chaos_settings").enabled
        if scenario.name == "violates":
            raise InvariantViolation("accounted: FAIL: row 3 has no rollout (evidence: 3 of 4 returned)")
        if scenario.name == "fault-breaks":
            raise FaultError("cannot reach the proxy API")
        if scenario.name == "plain-bug":
            raise ValueError("an ordinary bug in the runner")
        print("RAN", scenario.name, [step.kind for step in scenario.faults])
    return run
"""


def _scenario(pytester: pytest.Pytester, name: str, tag: str = "slowlink") -> None:
    pytester.makefile(".chaos.yaml", **{name: GOOD.format(name=name, tag=tag)})


def test_without_the_flag_no_yaml_is_collected(pytester: pytest.Pytester) -> None:
    _scenario(pytester, "slow-model-link")
    pytester.makefile(".chaos.yaml", broken=BROKEN)
    result = pytester.runpytest("--collect-only", "-q")
    result.assert_outcomes()
    result.stdout.no_fnmatch_line("*slow-model-link*")
    result.stdout.no_fnmatch_line("*latncy*")


def test_items_are_named_after_scenarios(pytester: pytest.Pytester) -> None:
    _scenario(pytester, "slow-model-link")
    pytester.makefile(".yaml", other="name: not-a-scenario\n")
    result = pytester.runpytest("--rollout-chaos", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["slow-model-link.chaos.yaml::slow-model-link", "1 test collected*"])


def test_a_broken_file_is_a_collection_error_with_path_and_line_and_no_traceback(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".chaos.yaml", broken=BROKEN)
    result = pytester.runpytest("--rollout-chaos")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting broken.chaos.yaml*",
            "broken.chaos.yaml:4: faults[[]0].kind: unknown fault kind 'latncy'; did you mean 'latency'? "
            "(valid: latency, *",
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*scenario/model.py*")


def test_invalid_yaml_syntax_is_reported_at_its_line(pytester: pytest.Pytester) -> None:
    pytester.makefile(".chaos.yaml", syntax="name: x\ndescription: [unclosed\n")
    result = pytester.runpytest("--rollout-chaos")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["syntax.chaos.yaml:2: (yaml): not valid YAML: *"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_tags_select_with_m(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RUNNER_CONFTEST)
    _scenario(pytester, "first", tag="alpha")
    _scenario(pytester, "second", tag="beta")
    result = pytester.runpytest("--rollout-chaos", "--strict-markers", "-m", "beta", "-s")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*RAN second [[]'latency']*"])
    result.stdout.no_fnmatch_line("*RAN first*")
    every = pytester.runpytest("--rollout-chaos", "-m", "chaos and network", "--collect-only", "-q")
    every.stdout.fnmatch_lines(["2 tests collected*"])


def test_a_scenario_file_outside_the_rootdir_is_named_by_its_path(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """pytest would name a file given outside its rootdir ``::violates``, which reruns nothing."""
    pytester.makeconftest(RUNNER_CONFTEST)
    outside = tmp_path_factory.mktemp("outside") / "violates.chaos.yaml"
    outside.write_text(GOOD.format(name="violates", tag="x"))
    result = pytester.runpytest("--rollout-chaos", "-rf", ".", str(outside))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"FAILED {outside.as_posix()}::violates*"])


def test_location_is_the_yaml_line_of_the_name(pytester: pytest.Pytester) -> None:
    pytester.makefile(".chaos.yaml", moved="# a comment first\n\n" + GOOD.format(name="moved", tag="x"))
    items, _ = pytester.inline_genitems("--rollout-chaos")
    assert [item.location for item in items] == [("moved.chaos.yaml", 2, "scenario: moved")]
    pytester.makeconftest(RUNNER_CONFTEST)
    result = pytester.runpytest("--rollout-chaos", "--junitxml=report.xml", "-o", "junit_family=xunit1")
    result.assert_outcomes(passed=1)
    case = ElementTree.parse(pytester.path / "report.xml").getroot().find(".//testcase")
    assert case is not None
    assert (case.get("file"), case.get("line"), case.get("name")) == ("moved.chaos.yaml", "2", "moved")


def test_an_invariant_violation_is_told_as_a_story(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RUNNER_CONFTEST)
    _scenario(pytester, "violates")
    result = pytester.runpytest("--rollout-chaos")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ scenario: violates _*",
            "scenario 'violates' failed (*violates.chaos.yaml:1)",
            "  A model link that gets slow; everything still completes.",
            "  upstream: NVIDIA-NeMo/Gym#1787",
            "fault schedule:",
            "  line 6: latency(latency_ms=200) on agent->model after 1 completed",
            "InvariantViolation:",
            "  accounted: FAIL: row 3 has no rollout*",
            "hint: the collector under test broke the invariant(s) above*",
            "FAILED violates.chaos.yaml::violates*",
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*def run(*")


def test_a_fault_error_gets_the_environment_hint(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RUNNER_CONFTEST)
    _scenario(pytester, "fault-breaks")
    result = pytester.runpytest("--rollout-chaos")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["FaultError:", "  cannot reach the proxy API", "hint: the harness could not*"]
    )


def test_other_exceptions_keep_the_pytest_traceback(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RUNNER_CONFTEST)
    _scenario(pytester, "plain-bug")
    result = pytester.runpytest("--rollout-chaos")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*raise ValueError*", "E*ValueError: an ordinary bug in the runner"])
    result.stdout.no_fnmatch_line("hint:*")


def test_scenarios_share_session_fixtures_with_python_tests(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        textwrap.dedent(
            """
            import pytest
            STARTS = []

            @pytest.fixture(scope="session")
            def shared_server():
                STARTS.append(1)
                return object()

            @pytest.fixture
            def chaos_scenario_runner():
                def run(scenario, request):
                    request.getfixturevalue("shared_server")
                    assert len(STARTS) == 1
                return run
            """
        )
    )
    pytester.makepyfile(
        test_py="""
        from conftest import STARTS
        def test_first(shared_server):
            assert STARTS == [1]
        """
    )
    _scenario(pytester, "uses-shared")
    result = pytester.runpytest("--rollout-chaos", "-p", "no:randomly")
    result.assert_outcomes(passed=2)


def test_the_default_runner_is_the_scenario_runner(chaos_scenario_runner: object) -> None:
    # Checked directly: running a scenario through it starts the whole stack (tests/catalog does).
    from pytest_rollout_chaos.scenario_items import run_scenario

    assert chaos_scenario_runner is run_scenario
