"""``accounted`` on hand-built outcomes: every requested row comes back exactly once, or the
collector raises."""

from __future__ import annotations

from pytest_rollout_chaos.collector.protocol import ShortCountError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.accounted import Accounted
from pytest_rollout_chaos.invariants.base import Status
from tests.invariants._builders import all_ok, observe, rollout


def test_accounted_passes_when_every_row_comes_back_once() -> None:
    assert Accounted().check(observe(4, all_ok(4))).status is Status.PASS


def test_accounted_passes_when_the_collector_raised() -> None:
    verdict = Accounted().check(observe(4, None, raised=ShortCountError("requested 4, returned 2")))
    assert verdict.status is Status.PASS


def test_accounted_fails_on_a_lost_row_and_tells_the_story() -> None:
    history = History()
    history.append("fault", "info", "inject", {"fault": "kill", "target": "agent-0"})
    history.append("agent", "fail", "POST /run", {"row": 2, "status": 500})
    verdict = Accounted().check(observe(4, [rollout(0), rollout(1), rollout(3)], history=history))
    assert verdict.status is Status.FAIL
    assert "rows [2] have no rollout (lost)" in verdict.summary
    assert "requested 4 rows" in verdict.summary
    assert "inject kill on agent-0" in verdict.summary
    assert "returned 3 rollouts" in verdict.summary
    assert any("POST /run" in line for line in verdict.evidence)


def test_accounted_fails_on_duplicates_and_none_placeholders() -> None:
    verdict = Accounted().check(observe(3, [rollout(0), rollout(0), rollout(1), None]))
    assert verdict.status is Status.FAIL
    assert "rows [0] have more than one rollout (duplicated)" in verdict.summary
    assert "1 list entries are None placeholders" in verdict.summary
    assert "rows [2] have no rollout" in verdict.summary


def test_accounted_is_unknown_when_nothing_finished() -> None:
    assert Accounted().check(observe(2, None)).status is Status.UNKNOWN
