"""``attempts_bounded`` against hand-built Histories holding the fault layer's record: no row is sent
more than ``max_attempts`` times, and a rollout's ``attempts`` counts the ``/run`` requests the
servers answered for it."""

from __future__ import annotations

from dataclasses import replace

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.attempts_bounded import AttemptsBounded
from pytest_rollout_chaos.invariants.base import Observation, Status
from tests.invariants._builders import observe, rollout, turns
from tests.invariants._records import CHAT, chat, run_answered, sent


def with_limit(observation: Observation, limit: int = 3) -> Observation:
    return replace(observation, max_attempts=limit)


def test_attempts_within_the_limit_and_counting_the_answered_runs_pass() -> None:
    history = History()
    run_answered(history, 0, turns(nan=True))
    run_answered(history, 0)
    run_answered(history, 1, status=None)  # cut before any answer: the transport resends it
    run_answered(history, 1)
    observation = with_limit(observe(2, [rollout(0, attempts=2), rollout(1)], history=history))
    assert AttemptsBounded().check(observation).status is Status.PASS


def test_retries_past_the_limit_fail() -> None:
    history = History()
    for _ in range(8):
        run_answered(history, 1, turns(nan=True))
    observation = with_limit(observe(2, [rollout(0), rollout(1, "aborted", attempts=8)], history=history))
    result = AttemptsBounded().check(observation)
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1: the servers answered 8 /run requests for it, above max_attempts=3",
        "row 1: attempts=8, above max_attempts=3",
    )


def test_attempts_that_under_count_the_answered_runs_fail() -> None:
    history = History()
    run_answered(history, 0, status=500)
    run_answered(history, 0)
    result = AttemptsBounded().check(with_limit(observe(1, [rollout(0, attempts=1)], history=history)))
    assert result.status is Status.FAIL
    assert result.evidence == ("row 0: attempts=1, but the servers answered 2 /run requests for it",)


def test_a_retry_storm_fails_even_when_the_collector_raised() -> None:
    history = History()
    for _ in range(4):
        run_answered(history, 0, status=500)
    observation = with_limit(observe(1, None, history=history, raised=RuntimeError("gave up")))
    assert AttemptsBounded().check(observation).status is Status.FAIL


def test_an_unknown_limit_is_unknown() -> None:
    assert AttemptsBounded().check(observe(1, [rollout(0)])).status is Status.UNKNOWN


def test_native_model_calls_of_one_turn_count_as_its_attempts_and_the_next_turn_does_not() -> None:
    history = History()
    link = "collector->policy"
    for turn in (0, 1, 1, 1):  # turn 1 tried three times
        sent(history, chat(1, turn), op=CHAT, link=link)
    sent(history, chat(1, 2), op=CHAT, link=link, status=None)  # no answer: not counted
    observation = with_limit(observe(2, [rollout(0), rollout(1, attempts=3)], history=history))
    result = AttemptsBounded().check(observation)
    assert result.status is Status.PASS, result.render()
    assert "the policy answered at most 3 model calls for a row's turn" in result.summary


def test_native_a_turn_tried_past_the_limit_fails_though_the_rollout_says_otherwise() -> None:
    history = History()
    for _ in range(4):
        sent(history, chat(1, 0), op=CHAT, link="collector->policy")
    observation = with_limit(observe(2, [rollout(0), rollout(1, "aborted", attempts=3)], history=history))
    result = AttemptsBounded().check(observation)
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1: the servers answered 4 model calls for one of its turns, above max_attempts=3",
        "row 1: attempts=3, but the servers answered 4 model calls for one of its turns",
    )
