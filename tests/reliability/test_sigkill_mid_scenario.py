"""pytest killed with SIGKILL in the middle of a scenario leaves no server process behind.

An inner pytest runs one slow scenario (every model call delayed) on the whole stack. Once
the agent is serving ``/run`` requests, the inner pytest gets SIGKILL: no hook, no finalizer,
no atexit runs. Every process it had started (policy, Toxiproxy, the Gym servers, and the
reaper that watches them) must be gone within a few seconds.
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

pytestmark = pytest.mark.slow  # runs a scenario on the whole stack

SLOW_SCENARIO = textwrap.dedent(
    """\
    name: slow-for-sigkill
    description: every model call waits, so the collection is still running when pytest dies
    workload:
      rows_per_task: 4
      tasks: [calculator]
    faults:
      - kind: latency
        target: agent->model
        latency_ms: 2000
    expect:
      rollouts: {all_completed: true}
      invariants: [accounted]
      within_s: 120
    """
)
INNER_PYTEST = (sys.executable, "-m", "pytest", "--rollout-chaos", "-p", "no:cacheprovider", "-q")
MIN_SERVERS = 8  # policy, toxiproxy, fault layer, resources, model, two agents, head
IN_FLIGHT_TIMEOUT_S = 60.0
CLEANUP_TIMEOUT_S = 10.0


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _run_in_flight(basetemp: Path) -> bool:
    """True once the fault layer has recorded a ``/run`` request to the calculator agent."""
    return any(
        '"POST /run"' in line and '"calculator_agent"' in line
        for path in basetemp.glob("*/fault_layer.events.jsonl")
        for line in path.read_text().splitlines()
    )


def test_sigkill_mid_scenario_leaves_no_server_behind(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "slow-for-sigkill.chaos.yaml").write_text(SLOW_SCENARIO)
    (project / "pytest.ini").write_text("[pytest]\n" + INNER_ASYNCIO_INI)
    basetemp = tmp_path / "inner"
    inner = subprocess.Popen(
        [*INNER_PYTEST, "--basetemp", str(basetemp), str(project)],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    descendants: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + IN_FLIGHT_TIMEOUT_S
        while not _run_in_flight(basetemp):
            if inner.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the inner scenario never started a /run (inner exit code {inner.poll()})")
            time.sleep(0.1)
        descendants = psutil.Process(inner.pid).children(recursive=True)
        assert len(descendants) >= MIN_SERVERS, f"only {len(descendants)} processes under the inner pytest"
        os.kill(inner.pid, signal.SIGKILL)
        inner.wait(timeout=10)
        deadline = time.monotonic() + CLEANUP_TIMEOUT_S
        while any(_alive(process) for process in descendants) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in descendants if _alive(p)]
        assert not left, f"processes outlived a SIGKILLed pytest by {CLEANUP_TIMEOUT_S}s: {left}"
    finally:
        for process in [psutil.Process(inner.pid), *descendants] if inner.poll() is None else descendants:
            if _alive(process):
                process.kill()
