"""``cancel_honoured`` against hand-built Histories: a collection cancelled from outside stops at once,
sends nothing more and ends with ``CancelledError``."""

from __future__ import annotations

import asyncio

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.cancel_honoured import CancelHonoured
from tests.invariants._builders import all_ok, observe
from tests.invariants._timeline import Recorded, at, fault, request, timed


def cancelled(history: History, t: float) -> None:
    at(history, t, "fault", "info", "inject", fault="cancel", target="collector", cancelled=True)


def test_a_cancel_honoured_at_once_passes() -> None:
    history = Recorded()
    request(history, 0.0, 0.3, row=0)
    cancelled(history, 0.4)
    request(history, 0.0, 0.6, row=1)  # already under way: it may finish
    observation = timed(observe(2, None, history=history, raised=asyncio.CancelledError()), ended=0.45)
    assert CancelHonoured().check(observation).status is Status.PASS


def test_a_swallowed_cancel_that_keeps_sending_fails() -> None:
    history = Recorded()
    cancelled(history, 0.4)
    at(history, 0.41, "collector", "invoke", "run", row=1)
    observation = timed(observe(2, all_ok(2), history=history), ended=1.2)
    verdict = CancelHonoured().check(observation)
    assert verdict.status is Status.FAIL
    assert "swallowed the cancellation and returned 2 rollouts" in verdict.summary
    assert "it sent 1 requests after the cancel (rows [1])" in verdict.summary


def test_a_cancel_turned_into_another_error_or_ending_late_fails() -> None:
    history = Recorded()
    cancelled(history, 0.4)
    wrapped = timed(observe(1, None, history=history, raised=RuntimeError("stopped")), ended=0.5)
    assert "not CancelledError" in CancelHonoured().check(wrapped).summary
    late = timed(observe(1, None, history=history, raised=asyncio.CancelledError()), ended=9.0)
    assert "it ended 8.60s after the cancel (allowed: 3s)" in CancelHonoured().check(late).summary


def test_without_an_outside_cancel_there_is_nothing_to_judge() -> None:
    history = Recorded()
    fault(history, 0.1, "cancel", cancelled=False)  # fired after the collection had ended
    assert CancelHonoured().check(observe(1, all_ok(1), history=history)).status is Status.NOT_JUDGED
