"""Teardown after a SIGKILL: how long anything a killed ``pytest --rollout-chaos`` started outlives it.

An inner pytest runs slow scenarios (every model call delayed 2 s) on the whole stack, without
xdist and with ``-n 2`` (each worker starts its own stack). Once every stack has a ``/run`` in
flight, the controlling pytest gets SIGKILL: no hook, finalizer or atexit runs. Reported: the
seconds until the last of its descendants (workers, reapers, proxies, the fault layer, servers)
is gone, and how many there were. Goal: 3 s or less.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil

from benchmarks._result import Number, Result

GOAL_S = 3.0
IN_FLIGHT_TIMEOUT_S = 180.0
GONE_TIMEOUT_S = 30.0
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
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\nrollout_chaos_catalog = false\n"


def run(*, workers: tuple[int, ...] = (0, 2)) -> Result:
    numbers: list[Number] = []
    details: dict[str, object] = {}
    for count in workers:
        label = f"-n {count}" if count else "no xdist"
        with tempfile.TemporaryDirectory(prefix="bench-teardown-") as scratch:
            gone_s, processes = killed_run(Path(scratch), count)
        numbers.append(Number(f"{label}: last process gone", gone_s, "s", GOAL_S, "at_most"))
        details[label] = {"processes": processes, "gone_s": gone_s}
    return Result("teardown", tuple(numbers), details=details)


def killed_run(scratch: Path, workers: int) -> tuple[float, int]:
    """SIGKILL an inner pytest once every stack collects; seconds until its tree is gone, its size."""
    project = scratch / "project"
    project.mkdir()
    for index in range(max(2 * workers, 1)):
        name = f"slow-{index}"
        (project / f"{name}.chaos.yaml").write_text(SLOW_SCENARIO.format(name=name))
    (project / "pytest.ini").write_text(INI)
    basetemp = scratch / "inner"
    command = [sys.executable, "-m", "pytest", "--rollout-chaos", "-p", "no:cacheprovider", "-q"]
    if workers:
        command += ["-n", str(workers)]
    inner = subprocess.Popen(
        [*command, "--basetemp", str(basetemp), str(project)],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + IN_FLIGHT_TIMEOUT_S
        while _stacks_collecting(basetemp) < max(workers, 1):
            if inner.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the inner pytest never had every stack collecting (exit {inner.poll()})")
            time.sleep(0.1)
        tree = psutil.Process(inner.pid).children(recursive=True)
        os.kill(inner.pid, signal.SIGKILL)
        killed = time.monotonic()
        inner.wait(timeout=10)
        while any(_alive(process) for process in tree):
            if time.monotonic() - killed > GONE_TIMEOUT_S:
                raise RuntimeError(f"processes still alive {GONE_TIMEOUT_S:.0f}s after the SIGKILL")
            time.sleep(0.02)
        return time.monotonic() - killed, len(tree)
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
    except psutil.NoSuchProcess:
        return False


if __name__ == "__main__":
    from benchmarks._result import table

    print(table([run()]))
