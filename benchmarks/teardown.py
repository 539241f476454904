"""Teardown after a SIGKILL: how long anything a killed ``pytest --rollout-chaos`` started outlives it.

An inner pytest runs slow scenarios (every model call delayed 2 s) on the whole stack, without
xdist and with ``-n 2`` (each worker starts its own stack). Once every stack has a ``/run`` in
flight, the controlling pytest gets SIGKILL: no hook, finalizer or atexit runs. Reported: the
seconds until the last of its descendants (workers, reapers, proxies, the fault layer, servers)
is gone, and how many there were. Goal: 3 s or less. The run itself is the one the SIGKILL
tests make (``tests/reliability/_killed_pytest.py``); here it is timed, not bounded.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks._result import Number, Result
from tests.reliability._killed_pytest import kill_mid_collection

GOAL_S = 3.0
IN_FLIGHT_TIMEOUT_S = 180.0
GONE_TIMEOUT_S = 30.0


def run(*, workers: tuple[int, ...] = (0, 2)) -> Result:
    numbers: list[Number] = []
    details: dict[str, object] = {}
    for count in workers:
        label = f"-n {count}" if count else "no xdist"
        with tempfile.TemporaryDirectory(prefix="bench-teardown-") as scratch:
            killed = kill_mid_collection(
                Path(scratch),
                workers=count,
                collecting_within_s=IN_FLIGHT_TIMEOUT_S,
                gone_within_s=GONE_TIMEOUT_S,
            )
        if killed.left:
            raise RuntimeError(
                f"processes still alive {GONE_TIMEOUT_S:.0f}s after the SIGKILL: {list(killed.left)}"
            )
        numbers.append(Number(f"{label}: last process gone", killed.gone_s, "s", GOAL_S, "at_most"))
        details[label] = {"processes": killed.processes, "gone_s": killed.gone_s}
    return Result("teardown", tuple(numbers), details=details)


if __name__ == "__main__":
    from benchmarks._result import table

    print(table([run()]))
