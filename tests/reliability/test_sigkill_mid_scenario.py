"""pytest killed with SIGKILL in the middle of a scenario leaves no server process behind.

An inner pytest runs one slow scenario (every model call delayed) on the whole stack. Once
the agent is serving ``/run`` requests, the inner pytest gets SIGKILL: no hook, no finalizer,
no atexit runs. Every process it had started (policy, Toxiproxy, the Gym servers, and the
reaper that watches them) must be gone within a few seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability._killed_pytest import NeverCollected, kill_mid_collection

pytestmark = pytest.mark.slow  # runs a scenario on the whole stack

MIN_SERVERS = 8  # policy, toxiproxy, fault layer, resources, model, two agents, head
CLEANUP_TIMEOUT_S = 10.0


def test_sigkill_mid_scenario_leaves_no_server_behind(tmp_path: Path) -> None:
    try:
        run = kill_mid_collection(
            tmp_path, workers=0, collecting_within_s=60.0, gone_within_s=CLEANUP_TIMEOUT_S
        )
    except NeverCollected as never:
        pytest.fail(f"the inner scenario never started a /run: {never}")
    assert run.processes >= MIN_SERVERS, f"only {run.processes} processes under the inner pytest"
    assert not run.left, f"processes outlived a SIGKILLed pytest by {CLEANUP_TIMEOUT_S}s: {list(run.left)}"
