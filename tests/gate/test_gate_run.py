"""``rollout-chaos gate`` end to end: two real pytest runs over two trees, compared.

The trees are tiny trainer packages whose collector is a known-bug collector on base and the
reference on head, so a fix and (swapped) a regression are real verdicts of real runs; a head whose
collector skips every train-mode scenario, or cannot import a module it needs, is judged from what
its pytest really reported.
"""

from __future__ import annotations

import json
import platform
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


def _tree(root: Path, collector_module: str, source: str = "") -> Path:
    """A trainer tree whose ``gated_trainer.collector.factory`` is ``collector_module``'s, or the
    one ``source`` defines."""
    package = root / "gated_trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "collector.py").write_text(source or f"from {collector_module} import factory  # noqa: F401\n")
    return root


# The reference, declaring that it collects only in validation mode: every train scenario skips.
SKIPS_TRAIN = """from pytest_rollout_chaos.collector.reference import factory as reference


def factory(ctx):
    return reference(ctx)


factory.modes = ("validation",)
"""
# A trainer whose collection code imports a module its environment lacks.
MISSING_MODULE = """def factory(ctx):
    import rollout_chaos_gate_absent_module  # noqa: F401
"""


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
        buggy,
        fixed,
        *(
            "--expect-fixed",
            "short-results",
            "--runs",
            "2",
            "--json",
            str(report),
            "--markdown",
            str(comment),
        ),
    )
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert "[base 1/2] short-results FAILED (" in err  # progress, as it goes, with the time spent
    assert "[base" not in out  # stdout is the results only
    assert "[head 2/2] baseline PASSED" in err
    assert out.splitlines()[-1] == "gate PASS: 1 fixed, 1 passed on both; 2 of 2 judged on both sides"
    # The move was run once more on both sides, with seed 1, and held.
    assert "[head-run2 1/1] short-results PASSED" in err
    document = json.loads(report.read_text())
    by_name = {entry["scenario"]: entry for entry in document["scenarios"]}
    assert by_name["short-results"]["change"] == "fixed"
    assert by_name["short-results"]["runs"] == ["fixed", "fixed"]
    assert [(rerun["run"], rerun["seed"]) for rerun in document["reruns"]] == [(2, 1)]
    assert document["reruns"][0]["sides"]["base"]["verdicts"]["short-results"]["outcome"] == "failed"
    assert (document["judged_on_both"], document["reached"]) == (2, 2)
    assert by_name["short-results"]["base"]["outcome"] == "failed"
    assert by_name["short-results"]["base"]["invariants"]["no_silent_short_count"] == "FAIL"
    assert by_name["short-results"]["head"]["invariants"]["no_silent_short_count"] == "PASS"
    assert document["passed"] is True
    assert document["sides_at_once"] is True
    assert "at the same time as head" in err
    assert document["wall_s"] >= max(document["base"]["wall_s"], document["head"]["wall_s"])
    assert document["base"]["tree"] == str(buggy.resolve())
    # Each side's environment, read in its interpreter (this one: both sides alike, nothing flagged)
    assert document["base"]["environment"]["trainer"] == {"tree": buggy.name, "commit": None}
    assert document["head"]["environment"]["versions"]["python"] == platform.python_version()
    assert document["environments_differ"] == []
    assert f"  trainer {fixed.name} (commit unknown)" in out
    assert comment.read_text().startswith("### ✅ rollout-chaos gate (`gated_trainer.collector:factory`)")
    assert f"| python | {platform.python_version()} | {platform.python_version()} |" in comment.read_text()

    status = _gate(fixed, buggy, "--expect-fixed", "short-results", "--runs", "1", "--sequential")
    out, err = capsys.readouterr()
    assert status == 1, out + err
    assert "then head" in err
    assert "the sides one after the other" in out
    assert "short-results: regression: passed on base, failed on head" in out
    assert out.splitlines()[-1] == "gate FAIL: 1 regression, 1 passed on both; 2 of 2 judged on both sides"


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


def test_a_skip_on_head_is_a_regression_or_not_judged_never_a_fix(
    trees: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    buggy, _ = trees
    skipping = _tree(buggy.parent / "skips-train", "", SKIPS_TRAIN)
    assert _gate(buggy, skipping, "--runs", "1") == 1
    out, err = capsys.readouterr()
    assert "baseline: regression: passed on base, skipped on head (train-mode scenario;" in out, out + err
    assert "--allow-skip baseline" in out
    assert "short-results: not judged: failed on base, skipped on head" in out
    assert out.splitlines()[-1] == "gate FAIL: 1 regression, 1 not judged; 0 of 2 judged on both sides"

    assert _gate(buggy, skipping, "--allow-skip", "baseline") == 2
    out, err = capsys.readouterr()
    assert "baseline: not judged: it must pass on both sides" in out
    assert out.splitlines()[-1] == (
        "gate NOT JUDGED: 1 not judged, 1 skip allowed; 0 of 2 judged on both sides"
    ), out + err


def test_a_head_that_cannot_import_the_trainer_is_not_judged_naming_the_module(
    trees: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, fixed = trees
    broken = _tree(fixed.parent / "missing-module", "", MISSING_MODULE)
    assert _gate(fixed, broken) == 2
    out, err = capsys.readouterr()
    assert (
        "head: not judged: the trainer could not be imported in 2 scenario(s) (baseline, short-results): "
        "module 'rollout_chaos_gate_absent_module' is missing; install it with: pip install the package "
        "that provides 'rollout_chaos_gate_absent_module'" in out
    ), out + err
    assert out.splitlines()[-1] == "gate NOT JUDGED: 2 not judged; 0 of 2 judged on both sides"


# The reference, except that with the run's seed 0 it loses rows silently: a verdict that moves
# on one seed only, as a probabilistic fault's draws make one.
SEED_ZERO_LOSES_ROWS = """import sys

from fixtures.collectors.silent_short_count import factory as buggy
from pytest_rollout_chaos.collector.reference import factory as reference


def factory(ctx):
    return buggy(ctx) if "--rollout-chaos-seed=0" in sys.argv else reference(ctx)
"""


def test_a_move_that_other_seeds_do_not_repeat_is_unstable_not_a_regression(
    trees: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, fixed = trees
    chancy = _tree(fixed.parent / "seed-zero-loses-rows", "", SEED_ZERO_LOSES_ROWS)
    report = tmp_path / "gate.json"
    status = _gate(fixed, chancy, "--json", str(report))  # the default: 3 runs
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert (
        "short-results: unstable over 3 runs (run 1: regression, run 2: passed on both, "
        "run 3: passed on both)" in out
    )
    assert out.splitlines()[-1] == "gate PASS: 1 unstable, 1 passed on both; 2 of 2 judged on both sides"
    document = json.loads(report.read_text())
    assert document["unstable"] == [line.strip() for line in out.splitlines() if "unstable over" in line]
    assert document["reruns"][1]["sides"]["head"]["verdicts"]["short-results"]["outcome"] == "passed"


def test_an_interpreter_the_tree_rejects_is_refused_unless_told(
    trees: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """NeMo RL main says requires-python >=3.13.14; run on another Python, it worked by luck."""
    buggy, fixed = trees
    (fixed / "pyproject.toml").write_text('[project]\nname = "gated-trainer"\nrequires-python = ">=3.99"\n')
    assert _gate(buggy, fixed) == 2
    err = capsys.readouterr().err
    assert (
        f"rollout-chaos gate: the head side ({TARGET}): {fixed.name}'s pyproject.toml says requires-python "
        "'>=3.99', and "
    ) in err
    assert f"is Python {platform.python_version()}: it accepts no " in err
    assert "(valid: an interpreter the tree accepts, named by --head-python;" in err
    assert "[base" not in err  # refused before anything ran
