"""What the gate tells while a side runs: a real side (a child pytest of five cheap tests, the first
starting two stand-in servers through the session's keeper) followed line by line, and the same
output replayed on a clock the test sets, for the estimate's arithmetic."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pytest_rollout_chaos.gate.progress import QUIET_S, STATUS_LINE, SideProgress
from pytest_rollout_chaos.gate.sides import SideRequest, run_side
from pytest_rollout_chaos.servers.keeper import STARTING_LINE
from tests._stand_in_servers import STARTS_SERVERS

# Five tests; the first "starts" two servers as the stack builder does (stand-ins, ready at once),
# so the child prints the keeper's lines before its first verdict.
CHILD_TESTS = (
    """
import time

import pytest
"""
    + STARTS_SERVERS
    + """

def test_b():
    time.sleep(0.2)


def test_c():
    time.sleep(0.2)


def test_d():
    pytest.skip("cannot run here")


def test_e():
    time.sleep(0.2)
"""
)
ELAPSED = r"\d+:\d\d elapsed"


def test_a_side_says_what_runs_which_of_how_many_ended_and_how_long_is_left(tmp_path: Path) -> None:
    project, tree = tmp_path / "project", tmp_path / "tree"
    project.mkdir()
    tree.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_side.py").write_text(CHILD_TESTS)
    told: list[str] = []
    request = SideRequest(
        target="reference", python=sys.executable, seed=0, scenarios=[str(project)], timeout_s=180
    )
    side = run_side("base", tree, request, tmp_path / "scratch", told.append)
    assert side.exit_code == 0, "\n".join(side.output_tail)
    assert told[0] == f"[base] running pytest on {tree} ({sys.executable})"
    assert told[1:4] == [
        f"[base] {STARTING_LINE}",
        "[base] rollout-chaos: policy ready in 0.0s",
        "[base] rollout-chaos: gym_model ready in 0.0s",
    ]
    verdicts = told[4:-1]
    expected = [
        rf"\[base 1/5\] test_starts_two_servers PASSED \({ELAPSED}\)",
        rf"\[base 2/5\] test_b PASSED \({ELAPSED}\)",
        rf"\[base 3/5\] test_c PASSED \({ELAPSED}, about \d+:\d\d left\)",
        rf"\[base 4/5\] test_d SKIPPED \({ELAPSED}, about \d+:\d\d left\)",
        rf"\[base 5/5\] test_e PASSED \({ELAPSED}\)",
    ]
    assert len(verdicts) == len(expected), told
    for line, pattern in zip(verdicts, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    assert re.fullmatch(r"\[base\] done in \d+:\d\d \(pytest exited 0\)", told[-1]), told[-1]

    # The same output on a clock the test sets: the stack took 30 s, each scenario after it 10 s.
    assert side.log is not None
    now = [0.0]
    replayed: list[str] = []
    follower = SideProgress("head", replayed.append, clock=lambda: now[0])
    for line in side.log.read_text().splitlines():
        if STATUS_LINE.search(line):
            now[0] += 30.0 if now[0] == 0 else 10.0
        follower.line(line)
    assert [line for line in replayed if line.startswith("[head ")] == [
        "[head 1/5] test_starts_two_servers PASSED (0:30 elapsed)",
        "[head 2/5] test_b PASSED (0:40 elapsed)",
        "[head 3/5] test_c PASSED (0:50 elapsed, about 0:20 left)",
        "[head 4/5] test_d SKIPPED (1:00 elapsed, about 0:10 left)",
        "[head 5/5] test_e PASSED (1:10 elapsed)",
    ]


def test_a_silent_side_says_it_is_still_running() -> None:
    now = [0.0]
    told: list[str] = []
    follower = SideProgress("head", told.append, clock=lambda: now[0])
    follower.line("collected 12 items / 9 deselected / 3 selected")
    now[0] = QUIET_S - 1
    follower.tick()
    assert told == []
    follower.line("x.chaos.yaml::baseline PASSED  [ 33%]")
    now[0] += QUIET_S
    follower.tick()
    assert told == [
        "[head 1/3] baseline PASSED (0:59 elapsed)",
        "[head] still running (1:59 elapsed, 1 of 3 ended)",
    ]
    follower.tick()  # once a minute, not once a poll
    assert len(told) == 2
