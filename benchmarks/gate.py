"""Gate wall time per trainer: ``rollout-chaos gate`` over the pinned base and head trees, whole catalog.

For each pair in ``tests/upstream`` (the pre-fix tree and the PR tree the adapters' tests use)
it runs the gate as a user would, whole catalog, in a subprocess, and reports the wall time of each
side and of the whole gate, the gate's exit status and summary line, and the verdict changes. It
runs each gate twice, side by side: as it runs by default (both sides at once, goal: three minutes)
and with ``--sequential``, and prints the ratio. Each
pair's gate runs with its trainer's interpreter, as the gate finds it: ``ROLLOUT_CHAOS_NEMO_RL_PYTHON``
and the like (CI's NeMo RL venv), else ``ROLLOUT_CHAOS_TRAINERS_PYTHON`` (an interpreter with the
trainers, CI's trainers venv), else this interpreter. A pair whose trees are absent, or whose
trainer that interpreter cannot import, is skipped, and the reason printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._result import Number, Result
from benchmarks.catalog import TRAINERS_PYTHON_ENV, imports
from pytest_rollout_chaos import targets
from pytest_rollout_chaos.gate.compare import UNCHANGED

REPO = Path(__file__).resolve().parent.parent
# The pinned trees: ``$ROLLOUT_CHAOS_UPSTREAM_DIR``, else the repository's ``tests/upstream``.
UPSTREAM = Path(os.environ.get("ROLLOUT_CHAOS_UPSTREAM_DIR") or REPO / "tests" / "upstream")
TIMEOUT_S = 3600.0
GOAL_S = 180.0  # a gate over the whole catalog, pinned pair, two cores

# pair -> (target, module that must import, base tarball, head tarball, the scenario the head fixes)
PAIRS: dict[str, tuple[str, str, str, str, str]] = {
    "slime#2078": ("slime", "httpx", "slime-fec3da9b", "slime-1bc255ed", "trajectory-exception-isolated"),
    "nemo_rl#2394": ("nemo_rl", "ray", "nemo-rl-3eebe4da", "nemo-rl-964b609a", "short-results"),
    "nemo_rl#2209": ("nemo_rl", "megatron", "nemo-rl-3069f281", "nemo-rl-c6a661e8", "validation-batched-env"),
}


def run(*, pairs: list[str] | None = None) -> Result:
    numbers: list[Number] = []
    details: dict[str, object] = {}
    for pair in pairs or list(PAIRS):
        target, needs, base, head, fixed = PAIRS[pair]
        python = (
            os.environ.get(targets.python_env(target) or "", "").strip()
            or os.environ.get(TRAINERS_PYTHON_ENV, "").strip()
            or sys.executable
        )
        trees = [UPSTREAM / f"{name}.tar.gz" for name in (base, head)]
        if not all(tree.is_file() for tree in trees):
            details[pair] = f"skipped: {trees[0].parent} has no {base} / {head} archives"
            continue
        why = imports(python, needs)
        if why is not None:
            details[pair] = f"skipped: {python} cannot import {needs} ({why}); set {TRAINERS_PYTHON_ENV}"
            continue
        print(f"  gate: {pair} ...", file=sys.stderr, flush=True)
        wall_s, facts = _gate(python, target, *trees, fixed)
        sequential_s, sequential = _gate(python, target, *trees, fixed, "--sequential")
        details[pair] = facts | {"sequential": sequential}
        numbers.append(Number(f"{pair} gate (sides at once)", wall_s, "s", goal=GOAL_S, direction="at_most"))
        numbers.append(Number(f"{pair} gate (--sequential)", sequential_s, "s"))
        numbers.append(Number(f"{pair} at once / sequential", wall_s / sequential_s, "x"))
        for side in ("base", "head"):
            if isinstance(facts.get(side), dict):
                numbers.append(Number(f"{pair} {side} side (at once)", facts[side]["wall_s"], "s"))
    for pair, fact in details.items():
        if isinstance(fact, str):
            print(f"  gate: {pair} {fact}", file=sys.stderr, flush=True)
    if not numbers:
        why = f"no pair could run here ({', '.join(details) or 'none chosen'}): the reasons are printed above"
        return Result("gate", skipped=why, details=details)
    return Result("gate", tuple(numbers), details=details)


def _gate(
    python: str, target: str, base: Path, head: Path, fixed: str, *extra: str
) -> tuple[float, dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="gate-benchmark-") as scratch:
        report = Path(scratch) / "gate.json"
        command = [
            python, "-m", "pytest_rollout_chaos.cli", "gate", "--target", target,
            "--base", str(base), "--head", str(head), "--expect-fixed", fixed, "--json", str(report), *extra,
        ]  # fmt: skip
        began = time.perf_counter()
        finished = subprocess.run(
            command, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
        wall_s = time.perf_counter() - began
        lines = finished.stdout.strip().splitlines()
        facts: dict[str, object] = {"exit_code": finished.returncode, "summary": lines[-1] if lines else ""}
        if report.is_file():
            document = json.loads(report.read_text())
            facts |= {"base": document["base"], "head": document["head"], "failures": document["failures"]}
            facts["changes"] = {
                entry["scenario"]: entry["change"]
                for entry in document["scenarios"]
                if entry["change"] not in UNCHANGED
            }
            facts["judged_on_both"] = document["judged_on_both"]
        else:
            facts["stderr"] = finished.stderr[-2000:]
    return wall_s, facts


if __name__ == "__main__":
    from benchmarks._result import table

    print(table([run(pairs=sys.argv[1:] or None)]))
