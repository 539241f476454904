"""``run_sides``: the two sides at the same time (or one after the other), and neither left running.

The first jobs here are plain functions on real threads: two that must meet at a barrier can only
both finish when they run at the same time; one that raises must make the other's stop event
fire, as a Ctrl-C in the gate does. The last runs two real sides, each its pytest child over a
trainer tree, and reads when each child started and ended.
"""

from __future__ import annotations

import sys
import threading
from functools import partial
from pathlib import Path

import pytest

from pytest_rollout_chaos.gate.sides import SideRequest, SideRun, run_side, run_sides

MEET_S = 5.0
TIMEOUT_S = 600.0  # the jobs' own deadline, as the gate passes it
REPO = Path(__file__).resolve().parents[2]


def _meeting(barrier: threading.Barrier, label: str) -> SideRun:
    barrier.wait()  # both jobs must be running for either to get past here
    return SideRun(label=label, tree=Path(label))


def test_the_sides_run_at_the_same_time_and_come_back_in_order() -> None:
    barrier = threading.Barrier(2, timeout=MEET_S)
    runs = run_sides(
        [lambda *, stop: _meeting(barrier, "base"), lambda *, stop: _meeting(barrier, "head")],
        at_once=True,
        timeout_s=TIMEOUT_S,
    )
    assert [run.label for run in runs] == ["base", "head"]


def test_sequential_sides_never_overlap() -> None:
    barrier = threading.Barrier(2, timeout=0.5)
    with pytest.raises(threading.BrokenBarrierError):
        run_sides(
            [lambda *, stop: _meeting(barrier, "base"), lambda *, stop: _meeting(barrier, "head")],
            at_once=False,
            timeout_s=TIMEOUT_S,
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
        run_sides([broken, waiting], at_once=True, timeout_s=TIMEOUT_S)
    assert stopped == [True], "the other side was told to stop, and had stopped, before the raise went on"


def _sides(root: Path) -> list[partial[SideRun]]:
    """Two real sides, base and head, each a pytest child running ``baseline`` over a tree whose
    collector is the reference."""
    request = SideRequest(
        target="gated_trainer.collector:factory",
        python=sys.executable,
        seed=0,
        scenarios=[str(REPO / "scenarios" / "baseline.chaos.yaml")],
        timeout_s=TIMEOUT_S,
    )
    jobs = []
    for label in ("base", "head"):
        package = root / label / "gated_trainer"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "collector.py").write_text(
            "from pytest_rollout_chaos.collector.reference import factory  # noqa: F401\n"
        )
        jobs.append(partial(run_side, label, root / label, request, root / "scratch", lambda line: None))
    return jobs


@pytest.mark.slow  # two pytest children, each starting the stack, twice
def test_real_sides_overlap_at_once_and_follow_each_other_when_sequential(tmp_path: Path) -> None:
    base, head = run_sides(_sides(tmp_path / "at-once"), at_once=True, timeout_s=TIMEOUT_S)
    assert (base.exit_code, head.exit_code) == (0, 0), base.output_tail + head.output_tail
    assert set(base.verdicts) == set(head.verdicts) == {"baseline"}
    # the two children ran at once: each started before the other had ended
    assert max(base.started, head.started) < min(base.ended, head.ended), (base, head)

    base, head = run_sides(_sides(tmp_path / "sequential"), at_once=False, timeout_s=TIMEOUT_S)
    assert (base.exit_code, head.exit_code) == (0, 0), base.output_tail + head.output_tail
    assert base.started < base.ended <= head.started < head.ended, "head started once base had ended"
