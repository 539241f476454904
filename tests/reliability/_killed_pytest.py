"""An inner pytest on slow scenarios, SIGKILLed while its stacks collect, and what outlives it.

SIGKILL runs no hook, finalizer or atexit: whatever the inner pytest started (servers, proxies,
reapers, xdist workers) must go by itself. Every model call is delayed, so the collections are
still running when the kill comes. Shared by the SIGKILL tests beside this file and by
``benchmarks/teardown.py``, which times the same run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.conftest import INNER_ASYNCIO_INI

SLOW_SCENARIO = textwrap.dedent(
    """\
    name: {name}
    description: every model call waits, so the collection is still running when pytest dies
    workload:
      rows_per_task: 4
      tasks: [calculator]
    faults:
      - kind: latency
        target: agent->model
        latency_ms: 2000
    expect:
      rollouts: {{all_completed: true}}
      invariants: [accounted]
      within_s: 120
    """
)
INNER_PYTEST = (sys.executable, "-m", "pytest", "--rollout-chaos", "-p", "no:cacheprovider", "-q")


class NeverCollected(RuntimeError):
    """The inner pytest ended, or its deadline passed, before every stack collected."""


@dataclass(frozen=True)
class KilledRun:
    processes: int  # every process under the inner pytest when it was killed
    children: int  # of those, its direct children (xdist workers, or the servers without xdist)
    left: tuple[str, ...]  # "pid command" of each process still alive at the bound
    gone_s: float  # from the SIGKILL until the last one went, or until the bound


def kill_mid_collection(
    scratch: Path, *, workers: int, collecting_within_s: float, gone_within_s: float
) -> KilledRun:
    """Run slow scenarios (two per xdist worker, one without xdist) under ``scratch``; SIGKILL the
    inner pytest once every stack has a ``/run`` in flight; wait up to ``gone_within_s`` for its
    processes to go. Anything still alive after that is killed here, so nothing leaks either way."""
    project = scratch / "project"
    project.mkdir()
    for index in range(max(2 * workers, 1)):
        name = f"slow-{index}"
        (project / f"{name}.chaos.yaml").write_text(SLOW_SCENARIO.format(name=name))
    (project / "pytest.ini").write_text("[pytest]\n" + INNER_ASYNCIO_INI)
    basetemp = scratch / "inner"
    xdist = ["-n", str(workers)] if workers else []
    inner = subprocess.Popen(
        [*INNER_PYTEST, *xdist, "--basetemp", str(basetemp), str(project)],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + collecting_within_s
        while _stacks_collecting(basetemp) < max(workers, 1):
            if inner.poll() is not None or time.monotonic() > deadline:
                raise NeverCollected(f"not every stack collected (inner exit code {inner.poll()})")
            time.sleep(0.1)
        tree = psutil.Process(inner.pid).children(recursive=True)
        children = sum(1 for process in tree if process.ppid() == inner.pid)
        os.kill(inner.pid, signal.SIGKILL)
        killed = time.monotonic()
        inner.wait(timeout=10)
        while any(_alive(process) for process in tree) and time.monotonic() - killed < gone_within_s:
            time.sleep(0.02)
        gone_s = time.monotonic() - killed
        left = tuple(f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in tree if _alive(p))
        return KilledRun(len(tree), children, left, gone_s)
    finally:
        for process in [psutil.Process(inner.pid), *tree] if inner.poll() is None else tree:
            if _alive(process):
                process.kill()


def _stacks_collecting(basetemp: Path) -> int:
    """How many fault layers (one per stack) have recorded a ``/run`` to the calculator agent."""
    files = basetemp.rglob("fault_layer.events.jsonl")
    return sum(1 for path in files if any(_is_agent_run(line) for line in path.read_text().splitlines()))


def _is_agent_run(line: str) -> bool:
    return '"POST /run"' in line and '"calculator_agent"' in line


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
