"""pytest -n 2 killed with SIGKILL mid-catalog leaves nothing behind: workers, reapers, servers.

Under xdist the servers belong to the workers, and a worker outlives its SIGKILLed controller
until it notices its channel is gone (4 to 7 s, before each worker's reaper watched the
controller). Two workers each run slow scenarios on a whole stack; once both stacks are
collecting, the controlling pytest gets SIGKILL, and every process under it must be gone soon
after. The bound is the goal, 3 s: generous against the fraction of a second it takes (``python
-m benchmarks --only teardown`` prints the time), well short of what a worker left alone takes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability._killed_pytest import NeverCollected, kill_mid_collection

pytestmark = pytest.mark.slow  # two whole stacks, one per xdist worker

WORKERS = 2
GONE_BOUND_S = 3.0


def test_sigkill_of_the_xdist_controller_takes_every_worker_and_server(tmp_path: Path) -> None:
    try:
        run = kill_mid_collection(
            tmp_path, workers=WORKERS, collecting_within_s=120.0, gone_within_s=GONE_BOUND_S
        )
    except NeverCollected as never:
        pytest.fail(f"the workers' stacks never both collected: {never}")
    assert run.children >= WORKERS, f"expected {WORKERS} workers under the controller, saw {run.children}"
    what = f"{len(run.left)} of {run.processes} processes outlived the controller by {run.gone_s:.1f}s"
    assert not run.left, f"{what}: {list(run.left)}"
    print(f"{run.processes} processes gone {run.gone_s:.2f}s after the controller's SIGKILL")
