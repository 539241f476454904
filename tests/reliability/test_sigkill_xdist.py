"""pytest -n 2 killed with SIGKILL mid-catalog leaves nothing behind: workers, reapers, servers.

Under xdist the servers belong to the workers, and a worker outlives its SIGKILLed controller
until it notices its channel is gone (4 to 7 s, before each worker's reaper watched the
controller). Two workers each run slow scenarios on a whole stack; once both stacks are
collecting, the controlling pytest gets SIGKILL, and every process under it must be gone soon
after. The bound is the goal, 3 s: generous against the fraction of a second it takes (``python
-m benchmarks --only teardown`` prints the time), well short of what a worker left alone takes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import INNER_ASYNCIO_INI

pytestmark = pytest.mark.slow  # two whole stacks, one per xdist worker

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
WORKERS = 2
INNER_PYTEST = (sys.executable, "-m", "pytest", "--rollout-chaos", "-p", "no:cacheprovider", "-q")
IN_FLIGHT_TIMEOUT_S = 120.0
GONE_BOUND_S = 3.0


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _stacks_collecting(basetemp: Path) -> int:
    """How many fault layers (one per worker's stack) have recorded a ``/run`` to the agent."""
    files = basetemp.rglob("fault_layer.events.jsonl")
    return sum(1 for path in files if any(_is_agent_run(line) for line in path.read_text().splitlines()))


def _is_agent_run(line: str) -> bool:
    return '"POST /run"' in line and '"calculator_agent"' in line


def test_sigkill_of_the_xdist_controller_takes_every_worker_and_server(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for index in range(2 * WORKERS):
        (project / f"slow-{index}.chaos.yaml").write_text(SLOW_SCENARIO.format(name=f"slow-{index}"))
    (project / "pytest.ini").write_text("[pytest]\n" + INNER_ASYNCIO_INI)
    basetemp = tmp_path / "inner"
    inner = subprocess.Popen(
        [*INNER_PYTEST, "-n", str(WORKERS), "--basetemp", str(basetemp), str(project)],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + IN_FLIGHT_TIMEOUT_S
        while _stacks_collecting(basetemp) < WORKERS:
            if inner.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the workers' stacks never both collected (inner exit code {inner.poll()})")
            time.sleep(0.1)
        tree = psutil.Process(inner.pid).children(recursive=True)
        workers = [process for process in tree if process.ppid() == inner.pid]
        assert len(workers) >= WORKERS, f"expected {WORKERS} workers under the controller, saw {workers}"
        os.kill(inner.pid, signal.SIGKILL)
        killed = time.monotonic()
        inner.wait(timeout=10)
        while any(_alive(process) for process in tree) and time.monotonic() - killed < GONE_BOUND_S:
            time.sleep(0.02)
        gone_s = time.monotonic() - killed
        left = [f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in tree if _alive(p)]
        what = f"{len(left)} of {len(tree)} processes outlived the controller by {gone_s:.1f}s"
        assert not left, f"{what}: {left}"
        print(f"{len(tree)} processes gone {gone_s:.2f}s after the controller's SIGKILL")
    finally:
        for process in [psutil.Process(inner.pid), *tree] if inner.poll() is None else tree:
            if _alive(process):
                process.kill()
