"""``bounded`` on hand-built outcomes: the collection ends within its deadline, raising or not, and a
hang names the requests it was waiting on."""

from __future__ import annotations

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.bounded import Bounded
from tests.invariants._builders import all_ok, observe


def test_bounded_fails_a_hang_and_names_what_it_waited_on() -> None:
    history = History()
    history.append("agent", "invoke", "POST /run", {"row": 0}, request_id="a")
    history.append("agent", "invoke", "POST /run", {"row": 1}, request_id="b")
    history.append("agent", "ok", "POST /run", {"row": 1, "status": 200}, request_id="b")
    verdict = Bounded().check(observe(2, None, history=history, elapsed_s=12.0, timed_out=True))
    assert verdict.status is Status.FAIL
    assert "hung: still running after 12.00s (deadline 10.00s)" in verdict.summary
    waiting = verdict.evidence[: verdict.evidence.index("last events:")]
    assert len(waiting) == 2
    assert "row=0" in waiting[1]


def test_bounded_passes_in_time_even_when_raising() -> None:
    assert Bounded().check(observe(2, all_ok(2), elapsed_s=3.0)).status is Status.PASS
    assert Bounded().check(observe(2, None, raised=RuntimeError("x"), elapsed_s=3.0)).status is Status.PASS
    assert Bounded().check(observe(2, all_ok(2), elapsed_s=30.0)).status is Status.FAIL
