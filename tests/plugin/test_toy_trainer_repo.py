"""A newcomer's day, end to end: a toy trainer repository with a suite of its own and the docs'
minimal collector as ``chaos.py`` (read out of "Writing a collector", so the page cannot drift from
what works), driven as a user drives it, each command a ``pytest`` of its own on the real stack.

The children are started by hand, not through pytester, whose own would put the repository on
``PYTHONPATH``: here, as with the ``pytest`` script, only the directory pytest is started in is
where ``chaos`` is found (``PYTHONSAFEPATH``), and the plugin comes from this working tree."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from tests.examples import _page

PYPROJECT = """\
[project]
name = "toy-trainer"
version = "0.1.0"

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
TRAINER_TEST = """\
def test_advantages_are_centred():
    rewards = [1.0, 0.0, 1.0, 0.0]
    mean = sum(rewards) / len(rewards)
    assert sum(reward - mean for reward in rewards) == 0.0
"""
# The docs' collector, one row lost on the way to the trainer: a bug for a scenario to catch.
BROKEN = """\
import chaos


class DropsARow:
    styles = ("gym",)

    def __init__(self, ctx):
        self.inner = chaos.make_collector(ctx)

    async def collect(self, rows, *, mode):
        return (await self.inner.collect(rows, mode=mode))[1:]


def make_collector(ctx):
    return DropsARow(ctx)
"""
FAILED_ID = re.compile(r"^FAILED (?P<id>\S+)")


def _toy_repo(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tests" / "test_trainer.py").write_text(TRAINER_TEST)
    (root / "chaos.py").write_text(_page.minimal_collector())
    (root / "broken.py").write_text(BROKEN)
    return root


def _pytest(repo: Path, *args: str) -> pytest.RunResult:
    """``pytest ARGS`` in ``repo``, as the user types it (``-p no:cacheprovider`` aside)."""
    env = {**os.environ, "PYTHONPATH": str(bundled.import_root()), "PYTHONSAFEPATH": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    began = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return pytest.RunResult(
        child.returncode, child.stdout.splitlines(), child.stderr.splitlines(), time.monotonic() - began
    )


def _assert_outcomes(result: pytest.RunResult, **expected: int) -> None:
    """``result.assert_outcomes``, with the child's output in the message when it differs."""
    __tracebackhide__ = True
    kinds = ("passed", "failed", "errors", "skipped")
    got = result.parseoutcomes()
    counts = {kind: got.get(kind, 0) for kind in kinds}
    assert counts == {kind: expected.get(kind, 0) for kind in kinds}, result.stdout.str()[-6000:]


def _failed_ids(result: pytest.RunResult) -> list[str]:
    """The ids of pytest's short summary's ``FAILED`` lines."""
    return [match["id"] for line in result.outlines if (match := FAILED_ID.match(line))]


@pytest.mark.slow
def test_a_toy_trainer_repo_runs_its_suite_the_catalog_and_its_collector_and_reruns_a_failure(
    tmp_path: Path,
) -> None:
    repo = _toy_repo(tmp_path / "toy-trainer")

    own = _pytest(repo)  # the trainer's suite, as before: the plugin starts nothing
    _assert_outcomes(own, passed=1)
    own.stdout.no_fnmatch_line("rollout-chaos*")

    baseline = _pytest(repo, "--rollout-chaos", "--rollout-chaos-scenario=baseline")
    _assert_outcomes(baseline, passed=1)
    baseline.stdout.fnmatch_lines(["*rollout-chaos*", "scenarios: 1 run, 1 passed, 0 failed"])
    baseline.stdout.no_fnmatch_line("*test_trainer*")

    target = "--rollout-chaos-target=chaos:make_collector"
    short = _pytest(repo, "--rollout-chaos", target, "--rollout-chaos-scenario=short-results")
    _assert_outcomes(short, passed=1)
    short.stdout.fnmatch_lines(["*PASS*short-results*"])

    broken = "--rollout-chaos-target=broken:make_collector"
    failing = _pytest(repo, "--rollout-chaos", broken, "--rollout-chaos-scenario=baseline")
    _assert_outcomes(failing, failed=1)
    failing.stdout.fnmatch_lines(["*accounted: FAIL*"])
    printed = _failed_ids(failing)
    assert len(printed) == 1, failing.stdout.str()

    rerun = _pytest(repo, "--rollout-chaos", broken, printed[0])  # pasted back as printed
    _assert_outcomes(rerun, failed=1)
    assert _failed_ids(rerun) == printed
