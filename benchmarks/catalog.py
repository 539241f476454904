"""Catalog wall time and stack start time on every stack this machine can run, as CI runs them.

For each stack (embedded or real NeMo Gym servers, tiny policy or real vLLM) it runs
``pytest --rollout-chaos scenarios`` in a subprocess and reports the wall time (stack start,
every scenario, teardown), pytest's outcome counts, and the stack start: the time the first
scenario's item spent beyond the scenario itself, which is where the session's servers,
Toxiproxy and fault layer are started. A
stack whose interpreter is not configured (``ROLLOUT_CHAOS_GYM_PYTHON``,
``ROLLOUT_CHAOS_VLLM_PYTHON``, as ``.ci/run`` exports them) is reported as skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._result import Number, Result

REPO = Path(__file__).resolve().parent.parent
CATALOG = REPO / "scenarios"
TIMEOUT_S = 1800.0
_COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")
_CALL = re.compile(r"^\s*([\d.]+)s call\s+\S+\.chaos\.yaml::(\S+)", re.MULTILINE)
_SCENARIO = re.compile(r"^\s+(PASS|FAIL|SKIP)\s+(\S+)\s+([\d.]+)s", re.MULTILINE)
GYM_ENV = "ROLLOUT_CHAOS_GYM_PYTHON"
VLLM_ENV = "ROLLOUT_CHAOS_VLLM_PYTHON"

STACKS: dict[str, tuple[list[str], list[str]]] = {  # name -> (options, environment it needs)
    "embedded+tiny": ([], []),
    "embedded+vllm": (["--rollout-chaos-backend=vllm"], [VLLM_ENV]),
    "nemo-gym+tiny": (["--rollout-chaos-gym=nemo-gym"], [GYM_ENV]),
    "nemo-gym+vllm": (["--rollout-chaos-gym=nemo-gym", "--rollout-chaos-backend=vllm"], [GYM_ENV, VLLM_ENV]),
}


def run(*, stacks: list[str] | None = None) -> Result:
    files = sorted(CATALOG.rglob("*.chaos.yaml"))
    if not files:
        return Result("catalog", skipped=f"no *.chaos.yaml under {CATALOG.relative_to(REPO)}/ yet")
    numbers: list[Number] = []
    details: dict[str, object] = {"scenarios": len(files)}
    for name in stacks or list(STACKS):
        options, needs = STACKS[name]
        missing = [variable for variable in needs if not os.environ.get(variable)]
        if missing:
            details[name] = f"skipped: {', '.join(missing)} not set"
            continue
        wall_s, start_s, details[name] = _run_catalog(options)
        numbers.append(Number(f"{name} wall time", wall_s, "s"))
        numbers.append(Number(f"{name} stack start", start_s, "s"))
    if not numbers:
        return Result("catalog", skipped="no stack could run")
    return Result("catalog", tuple(numbers), details=details)


def _run_catalog(options: list[str]) -> tuple[float, float, dict[str, object]]:
    """Wall time, stack start (the largest gap between an item's call and its scenario) and outcome."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--rollout-chaos",
        *options,
        "scenarios",
        "-p",
        "no:cacheprovider",
        "-q",
        "--durations=0",
        "--durations-min=0",
        "-vv",
    ]
    began = time.perf_counter()
    finished = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    wall_s = time.perf_counter() - began
    lines = finished.stdout.strip().splitlines()
    summary = lines[-1] if lines else ""
    counts = {
        word.rstrip("s") if word.startswith("error") else word: int(n) for n, word in _COUNTS.findall(summary)
    }
    # A skipped scenario's time is all setup (it may have started the stack): none of it is its own.
    elapsed = {
        name: 0.0 if status == "SKIP" else float(seconds)
        for status, name, seconds in _SCENARIO.findall(finished.stdout)
    }
    gaps = [float(call) - elapsed[name] for call, name in _CALL.findall(finished.stdout) if name in elapsed]
    start_s = max(gaps) if gaps else float("nan")
    return wall_s, start_s, {"exit_code": finished.returncode, "outcomes": counts, "summary": summary}
