"""``--rollout-chaos-json``: one results document per run that validates against the shipped
schema, alone and under pytest-xdist (one document with every worker's scenarios), with each
scenario's verdicts, the faults and what they touched, and its timings. The scenarios run through
a runner without servers that fills a real ``ScenarioResult`` and lets the real invariants judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_rollout_chaos.report.json_report import json_schema
from tests.conftest import INNER_ASYNCIO_INI
from tests.plugin._report_project import make_project

VALIDATOR = jsonschema.Draft202012Validator(json_schema(), format_checker=jsonschema.FormatChecker())
NAMES = ("all-complete", "loses-a-row", "no-result", "not-here")


def _document(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    VALIDATOR.validate(document)
    return document


def _check_scenarios(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What every run of the four scenarios must say, wherever they ran; the entries by name."""
    scenarios = {entry["name"]: entry for entry in document["scenarios"]}
    assert sorted(scenarios) == sorted(NAMES)
    assert document["totals"] == {
        "scenarios": 4,
        "passed": 1,
        "failed": 2,
        "error": 0,
        "skipped": 1,
        "faults_injected": 2,
        # the standing claim checks find nothing to judge without a server record: NOT_JUDGED
        "verdicts": {"PASS": 9, "FAIL": 1, "UNKNOWN": 0, "NOT_JUDGED": 22},
    }
    lost = scenarios["loses-a-row"]
    assert lost["outcome"] == "failed"
    assert lost["file"] == {"path": str(Path(lost["file"]["path"])), "line": 1}
    assert lost["upstream"] == ["NVIDIA-NeMo/Gym#1787"]
    accounted = next(v for v in lost["result"]["verdicts"] if v["name"] == "accounted")
    assert accounted["status"] == "FAIL"
    corroborated = next(v for v in lost["result"]["verdicts"] if v["name"] == "corroborated")
    assert corroborated["status"] == "NOT_JUDGED"
    assert (lost["result"]["witnesses"], lost["result"]["vacuous"]) == ([], [])
    assert "2" in accounted["summary"]
    (fault,) = lost["result"]["faults"]
    assert (fault["kind"], fault["target"], fault["line"]) == ("latency", "agent->model", 8)
    assert fault["touched"] == 2
    assert 0 <= fault["injected_at_s"] <= fault["healed_at_s"]
    assert lost["result"]["row_outcomes"] == {"completed": 2, "missing": 1}
    for name in ("all-complete", "loses-a-row"):
        timings = scenarios[name]["timings"]
        assert timings["elapsed_s"] == 0.25
        assert timings["within_s"] == 30
        assert timings["setup_s"] is not None
        assert timings["call_s"] is not None
    assert scenarios["no-result"]["result"] is None
    assert scenarios["no-result"]["headline"] == "RuntimeError: the stack could not start"
    assert scenarios["not-here"]["outcome"] == "skipped"
    assert scenarios["not-here"]["message"] == "latency needs a proxy this backend lacks"
    return scenarios


def test_the_json_document_tells_the_run_and_every_scenario(pytester: pytest.Pytester) -> None:
    make_project(pytester, *NAMES)
    option = "--rollout-chaos-json=out/results.json"
    result = pytester.runpytest("--rollout-chaos", option, "--rollout-chaos-seed=5")
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    path = pytester.path / "out" / "results.json"
    result.stdout.fnmatch_lines([f"json: {path}"])
    document = _document(path)
    assert document["run"]["settings"]["seed"] == 5
    assert document["run"]["command"].startswith(f"pytest --rollout-chaos {option} ")
    assert document["run"]["versions"]["pytest"] == pytest.__version__
    assert document["run"]["workers"] == []
    scenarios = _check_scenarios(document)
    assert {entry["worker"] for entry in scenarios.values()} == {""}


def test_the_ini_twin_writes_it_too(pytester: pytest.Pytester) -> None:
    pytester.makeini(f"[pytest]\n{INNER_ASYNCIO_INI}rollout_chaos_json = results.json\n")
    make_project(pytester, *NAMES)
    pytester.runpytest("--rollout-chaos", "-k", "all-complete").assert_outcomes(passed=1)
    document = _document(pytester.path / "results.json")
    assert [entry["name"] for entry in document["scenarios"]] == ["all-complete"]


def test_under_xdist_one_document_covers_every_worker(pytester: pytest.Pytester) -> None:
    make_project(pytester, *NAMES)
    result = pytester.runpytest_subprocess(
        "--rollout-chaos",
        "-n",
        "2",
        "--rollout-chaos-json=results.json",
        "-p",
        "no:cacheprovider",
        timeout=120,
    )
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    assert [path.name for path in pytester.path.rglob("*.json")] == ["results.json"]  # no per-worker files
    document = _document(pytester.path / "results.json")
    assert document["run"]["workers"] == ["gw0", "gw1"]
    scenarios = _check_scenarios(document)
    assert {entry["worker"] for entry in scenarios.values()} <= {"gw0", "gw1"}
    assert [entry["nodeid"] for entry in document["scenarios"]] == sorted(
        entry["nodeid"] for entry in document["scenarios"]
    )
