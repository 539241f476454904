"""Reports as users see them: the ``rollout-chaos`` terminal section, JUnit XML properties, and the
HTML page written by ``--rollout-chaos-report``; scenarios run through a runner that fills a real
``ScenarioResult`` (judged by the real invariants) without servers, plus one run on the real stack."""

from __future__ import annotations

import platform
import time
from pathlib import Path
from xml.etree import ElementTree

import psutil
import pytest

from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from tests.plugin._report_project import make_project


def test_the_terminal_section_counts_scenarios_faults_and_invariants(pytester: pytest.Pytester) -> None:
    make_project(pytester, "all-complete", "loses-a-row")
    result = pytester.runpytest("--rollout-chaos")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*= rollout-chaos =*",
            "scenarios: 2 run, 1 passed, 1 failed",
            "faults injected: 2",
            # the standing invariants judge every scenario; with no server record here, the
            # claim checks find nothing to judge (silent: no scenario lists them)
            "invariants: 9 passed, 1 failed, 0 unknown, 22 not judged",
            "  accounted            1 passed, 1 failed",
            "  attempts_bounded     2 passed",
            "  bounded              2 passed",
            "  concurrency_bounded  2 not judged",
            "  corroborated         2 not judged",
            "per scenario:",
            "  PASS   all-complete     0.25s  1 fault",
            "  FAIL   loses-a-row      0.25s  1 fault  accounted FAIL",
        ]
    )
    result.stdout.no_fnmatch_line("report: *")


def test_a_scenario_that_ends_without_a_result_is_counted(pytester: pytest.Pytester) -> None:
    make_project(pytester, "all-complete", "no-result")
    result = pytester.runpytest("--rollout-chaos")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "scenarios: 2 run, 1 passed, 1 failed",
            "  FAIL   no-result     * 0 faults  RuntimeError: the stack could not start",
        ]
    )


def test_no_section_without_scenarios_unless_verbose(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    quiet = pytester.runpytest("--rollout-chaos")
    quiet.assert_outcomes(passed=1)
    quiet.stdout.no_fnmatch_line("*rollout-chaos =*")
    verbose = pytester.runpytest("--rollout-chaos", "-v")
    verbose.stdout.fnmatch_lines(["*= rollout-chaos =*", "scenarios: none run"])


def test_junit_xml_carries_the_scenario_properties(pytester: pytest.Pytester) -> None:
    make_project(pytester, "loses-a-row")
    result = pytester.runpytest("--rollout-chaos", "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    case = ElementTree.parse(pytester.path / "junit.xml").getroot().find(".//testcase")
    assert case is not None
    names = [prop.get("name") for prop in case.iter("property")]
    assert len(names) == len(set(names)), names  # one writer, each fact once
    properties = {prop.get("name"): prop.get("value") for prop in case.iter("property")}
    assert properties["scenario"] == "loses-a-row"
    assert properties["outcome"] == "the collector returned 2 rollouts for 3 rows (2 completed)"
    assert properties["faults_injected"] == "1"
    assert properties["invariant:accounted"] == "FAIL"
    assert properties["invariant:bounded"] == "PASS"
    assert properties["invariant:corroborated"] == "NOT_JUDGED"  # standing; no server record here
    assert properties["upstream"] == "NVIDIA-NeMo/Gym#1787"
    assert properties["tags"] == "network, demo"
    assert properties["scenario_file"] == "loses-a-row.chaos.yaml:1"
    assert properties["rows"] == "3"
    assert properties["elapsed_s"] == "0.25"
    assert properties["passed"] == "False"
    assert not any(str(name).startswith("collection:") for name in properties), "one collection, none listed"


def test_junit_xml_says_how_each_collection_after_the_first_ended(pytester: pytest.Pytester) -> None:
    make_project(pytester, "two-steps")
    pytester.runpytest("--rollout-chaos", "--junitxml=junit.xml")
    case = ElementTree.parse(pytester.path / "junit.xml").getroot().find(".//testcase")
    assert case is not None
    properties = {prop.get("name"): prop.get("value") for prop in case.iter("property")}
    assert properties["collection:2"] == "raised RuntimeError: no permit left"


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["in-process", "xdist"])
def test_a_scenarios_junit_class_name_has_no_dots_but_package_boundaries(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    """``scenarios/v1.2/all-complete.chaos.yaml`` is class ``scenarios.v1_2.all-complete`` (Jenkins:
    package ``scenarios.v1_2``, class ``all-complete``), not ``scenarios.v1.2.all-complete.chaos.yaml``;
    a Python test keeps pytest's name; ``-W error`` stays clean (no experimental API used)."""
    make_project(pytester, "loses-a-row", "all-complete")
    folder = pytester.path / "scenarios" / "v1.2"
    folder.mkdir(parents=True)
    (pytester.path / "all-complete.chaos.yaml").rename(folder / "all-complete.chaos.yaml")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "--rollout-chaos", "--junitxml=junit.xml", "--junit-prefix=ci", "-W", "error", *xdist
    )
    result.assert_outcomes(passed=2, failed=1)
    cases = ElementTree.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    assert sorted((case.get("classname"), case.get("name")) for case in cases) == [
        ("ci.loses-a-row", "loses-a-row"),
        ("ci.scenarios.v1_2.all-complete", "all-complete"),
        ("ci.test_plain", "test_plain"),
    ]


def test_the_html_report_names_each_scenario_verdict_and_fault(pytester: pytest.Pytester) -> None:
    make_project(pytester, "all-complete", "loses-a-row", "no-result")
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-report=out/report.html")
    result.assert_outcomes(passed=1, failed=2)
    path = pytester.path / "out" / "report.html"
    result.stdout.fnmatch_lines([f"report: {path}"])
    page = path.read_text(encoding="utf-8")
    for name in ("all-complete", "loses-a-row", "no-result"):
        assert f">{name}</a>" in page  # the index links each scenario
    assert '<span class="status fail">FAIL</span>' in page
    assert '<span class="status pass">PASS</span>' in page
    assert "latency on agent-&gt;model (latency_ms=200)" in page
    assert "A slow model link &lt;em&gt;under load&lt;/em&gt;" in page
    assert "RuntimeError: the stack could not start" in page
    assert page.count("<svg ") == 2  # no picture for the scenario without a result
    # the page names its run
    assert "<dt>target</dt><dd><code>reference</code></dd>" in page
    assert "<dt>seed</dt><dd>0</dd>" in page
    assert "<dt>toxiproxy</dt><dd>auto (not started)</dd>" in page
    assert f"Python {platform.python_version()}, pytest {pytest.__version__}" in page
    assert "<code>pytest --rollout-chaos --rollout-chaos-report=out/report.html " in page


@pytest.mark.slow
def test_a_real_scenario_writes_a_report_naming_its_fault(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".chaos.yaml",
        real="""\
name: real-slow-link
description: The model link gets slow for a while; every row still completes.
workload:
  rows_per_task: 2
faults:
  - kind: latency
    target: agent->model
    at: start
    latency_ms: 100
    duration_s: 0.5
expect:
  rollouts: {all_completed: true}
  invariants: [accounted, bounded]
  within_s: 60
""",
    )
    report = pytester.path / "report.html"
    result = pytester.runpytest_subprocess(
        "--rollout-chaos", f"--rollout-chaos-report={report}", "-p", "no:cacheprovider", timeout=240
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["scenarios: 1 run, 1 passed, 0 failed", "faults injected: 1", f"report: {report}"]
    )
    page = report.read_text(encoding="utf-8")
    assert "real-slow-link" in page
    assert "latency on agent-&gt;model (latency_ms=100" in page
    assert page.count('<g class="pill completed">') == 2  # one lane per row, each completed
    assert _servers_left(pytester.path) == []


def _servers_left(under: Path, timeout_s: float = 10.0) -> list[int]:
    """Pids of server processes whose events file lies under ``under`` (the inner run's), after a grace."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = []
        for process in psutil.process_iter():
            try:
                events_file = process.environ().get(EVENTS_FILE_ENV, "")
                if events_file.startswith(str(under)) and process.status() != psutil.STATUS_ZOMBIE:
                    left.append(process.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def test_verbose_runs_show_each_scenarios_faults_and_outcome_as_it_ends(pytester: pytest.Pytester) -> None:
    make_project(pytester, "all-complete", "loses-a-row")
    verbose = pytester.runpytest("--rollout-chaos", "-v")
    verbose.stdout.fnmatch_lines(
        [
            "all-complete.chaos.yaml::all-complete PASSED*",
            "    t=  0.0?s inject latency on agent->model",
            "    t=  0.0?s heal latency on agent->model",
            "    outcome: the collector returned 3 rollouts for 3 rows (3 completed) after 0.25s",
            "loses-a-row.chaos.yaml::loses-a-row FAILED*",
            "    t=  0.0?s inject latency on agent->model",
        ]
    )
    quiet = pytester.runpytest("--rollout-chaos")
    quiet.stdout.no_fnmatch_line("    outcome: *")


def test_under_xdist_one_page_and_one_section_cover_every_scenario(pytester: pytest.Pytester) -> None:
    make_project(pytester, "all-complete", "loses-a-row", "no-result", "not-here")
    before = {path.relative_to(pytester.path) for path in pytester.path.rglob("*")}
    result = pytester.runpytest_subprocess(
        "--rollout-chaos",
        "-n",
        "2",
        "--rollout-chaos-report=report.html",
        "-p",
        "no:cacheprovider",
        timeout=120,
    )
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*= rollout-chaos =*",
            "scenarios: 4 run, 1 passed, 2 failed, 1 skipped",
            "faults injected: 2",
            "invariants: 9 passed, 1 failed, 0 unknown, 22 not judged",
            "per scenario:",
            "  PASS   all-complete *",
            "  FAIL   loses-a-row *accounted FAIL",
            "  FAIL   no-result *RuntimeError: the stack could not start",
            "  SKIP   not-here *latency needs a proxy this backend lacks",
            f"report: {pytester.path / 'report.html'}",
        ]
    )
    assert len([line for line in result.stdout.lines if "= rollout-chaos =" in line]) == 1
    left = {path.relative_to(pytester.path) for path in pytester.path.rglob("*")} - before
    assert {path for path in left if not _pytester_own(path)} == {Path("report.html")}  # no per-worker files
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    for name in ("all-complete", "loses-a-row", "no-result", "not-here"):
        assert f">{name}</a>" in page
    assert "<dt>xdist workers</dt><dd>gw0, gw1</dd>" in page
    assert page.count("<svg ") == 2  # the two scenarios with a result, from whichever worker


def _pytester_own(path: Path) -> bool:
    """What ``runpytest_subprocess`` itself leaves: captured output, the inner basetemp, bytecode."""
    return (
        path.parts[0] in ("stdout", "stderr")
        or path.parts[0].startswith("runpytest-")
        or ("__pycache__" in path.parts)
    )


def test_a_skipped_scenario_shows_its_reason_in_the_summary(pytester: pytest.Pytester) -> None:
    make_project(pytester, "not-here")
    result = pytester.runpytest("--rollout-chaos", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIP*not-here*latency needs a proxy this backend lacks*"])
    result.stdout.no_fnmatch_line("*Skipped: latency*")
