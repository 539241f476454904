"""``rollout-chaos gate`` end to end: two real pytest runs over two trees, compared.

The trees are tiny trainer packages whose collector is a known-bug collector on base and the
reference on head, so a fix and (swapped) a regression are real verdicts of real runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rollout_chaos import cli

pytestmark = pytest.mark.slow  # each gate runs two child pytest sessions that start the stack

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = [
    str(REPO / "scenarios" / "short-results.chaos.yaml"),
    str(REPO / "scenarios" / "baseline.chaos.yaml"),
]
TARGET = "gated_trainer.collector:factory"


def _tree(root: Path, collector_module: str) -> Path:
    """A trainer tree whose ``gated_trainer.collector.factory`` is ``collector_module``'s."""
    package = root / "gated_trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "collector.py").write_text(f"from {collector_module} import factory  # noqa: F401\n")
    return root


@pytest.fixture
def trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.chdir(REPO)  # the children import the known-bug collectors from fixtures/
    buggy = _tree(tmp_path / "before-fix", "fixtures.collectors.silent_short_count")
    fixed = _tree(tmp_path / "after-fix", "pytest_rollout_chaos.collector.reference")
    return buggy, fixed


def _gate(base: Path, head: Path, *extra: str) -> int:
    return cli.main(
        ["gate", "--target", TARGET, "--base", str(base), "--head", str(head), *extra, *SCENARIOS]
    )


def test_a_fix_passes_the_gate_and_swapping_the_trees_is_a_regression(
    trees: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buggy, fixed = trees
    report, comment = tmp_path / "gate.json", tmp_path / "gate.md"
    status = _gate(
        buggy, fixed, "--expect-fixed", "short-results", "--json", str(report), "--markdown", str(comment)
    )
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert "[base 1/2] short-results FAILED" in err  # progress, as it goes
    assert "[head 2/2] baseline PASSED" in err
    assert out.splitlines()[-1] == "gate PASS: 1 fixed, 1 same"
    document = json.loads(report.read_text())
    by_name = {entry["scenario"]: entry for entry in document["scenarios"]}
    assert by_name["short-results"]["change"] == "fixed"
    assert by_name["short-results"]["base"]["outcome"] == "failed"
    assert by_name["short-results"]["base"]["invariants"]["no_silent_short_count"] == "FAIL"
    assert by_name["short-results"]["head"]["invariants"]["no_silent_short_count"] == "PASS"
    assert document["passed"] is True
    assert document["base"]["tree"] == str(buggy.resolve())
    assert comment.read_text().startswith("### ✅ rollout-chaos gate (`gated_trainer.collector:factory`)")

    status = _gate(fixed, buggy, "--expect-fixed", "short-results")
    out, err = capsys.readouterr()
    assert status == 1, out + err
    assert "short-results: regression: passed on base, failed on head" in out
    assert out.splitlines()[-1] == "gate FAIL: 1 regression, 1 same"


def test_a_side_that_cannot_run_is_not_judged(
    trees: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    buggy, _ = trees
    empty = buggy.parent / "no-trainer"
    empty.mkdir()
    assert _gate(buggy, empty) == 2
    err = capsys.readouterr().err
    assert "the head run" in err
    assert "with no scenario verdicts" in err
    assert "module 'gated_trainer.collector' not found" in err  # the child's usage error, shown


def test_bad_usage_is_caught_before_anything_runs(
    trees: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    buggy, fixed = trees
    assert _gate(buggy, fixed, "--expect-fixed", "short-result") == 2
    err = capsys.readouterr().err
    assert (
        "--expect-fixed short-result: no such scenario among those run (valid: baseline, short-results)"
        in err
    )
    assert _gate(buggy, buggy.parent / "nowhere") == 2
    assert "nowhere: no such folder or archive" in capsys.readouterr().err
