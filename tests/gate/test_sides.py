"""``run_sides``: the two sides at the same time (or one after the other), and neither left running.

Each job here is a plain function on real threads: two that must meet at a barrier can only
both finish when they run at the same time; one that raises must make the other's stop event
fire, as a Ctrl-C in the gate does.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pytest_rollout_chaos.gate.sides import SideRun, run_sides

MEET_S = 5.0


def _meeting(barrier: threading.Barrier, label: str) -> SideRun:
    barrier.wait()  # both jobs must be running for either to get past here
    return SideRun(label=label, tree=Path(label))


def test_the_sides_run_at_the_same_time_and_come_back_in_order() -> None:
    barrier = threading.Barrier(2, timeout=MEET_S)
    runs = run_sides(
        [lambda *, stop: _meeting(barrier, "base"), lambda *, stop: _meeting(barrier, "head")], at_once=True
    )
    assert [run.label for run in runs] == ["base", "head"]


def test_sequential_sides_never_overlap() -> None:
    barrier = threading.Barrier(2, timeout=0.5)
    with pytest.raises(threading.BrokenBarrierError):
        run_sides(
            [lambda *, stop: _meeting(barrier, "base"), lambda *, stop: _meeting(barrier, "head")],
            at_once=False,
        )


def test_a_side_that_raises_stops_the_other_before_the_error_goes_on() -> None:
    stopped: list[bool] = []
    started = threading.Event()

    def broken(*, stop: threading.Event) -> SideRun:
        started.wait(MEET_S)
        raise KeyboardInterrupt  # what a Ctrl-C looks like to the gate

    def waiting(*, stop: threading.Event) -> SideRun:
        started.set()
        stopped.append(stop.wait(MEET_S))  # a side's child is stopped once this is set
        return SideRun(label="head", tree=Path("head"))

    with pytest.raises(KeyboardInterrupt):
        run_sides([broken, waiting], at_once=True)
    assert stopped == [True], "the other side was told to stop, and had stopped, before the raise went on"
