"""The judge's rules: what they say, that the reference collector's own copies agree with them, and
that a bug planted in the collector's copy no longer blinds the invariant."""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Sequence

import pytest

from pytest_rollout_chaos.collector import failures, results
from pytest_rollout_chaos.collector.gym_client import GymRequestError
from pytest_rollout_chaos.collector.prefix import SpliceError, splice
from pytest_rollout_chaos.collector.protocol import Rollout, Turn
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.history import logprob_digest
from pytest_rollout_chaos.invariants import rules
from pytest_rollout_chaos.invariants.base import Observation, Status
from pytest_rollout_chaos.invariants.finite_logprobs import FiniteLogprobs
from pytest_rollout_chaos.invariants.prefix_consistent import PrefixConsistent
from pytest_rollout_chaos.invariants.root_cause_visible import RootCauseVisible
from tests.collector._fake_gym import FakeGym, context, rows
from tests.invariants._builders import observe, rollout, turns

NAN = float("nan")
EOS = 2


def one_turn(*logprobs: object, tokens: int | None = None) -> list[Turn]:
    count = len(logprobs) if tokens is None else tokens
    return [Turn([1], list(range(10, 10 + count)), list(logprobs))]  # type: ignore[arg-type]


LOGPROB_CASES = {
    "finite": one_turn(-0.1, -2.5, 0),
    "nan": one_turn(-0.1, NAN),
    "inf": one_turn(float("inf")),
    "minus-inf": one_turn(-0.2, float("-inf")),
    "null": one_turn(None),
    "text": one_turn("-0.5"),
    "boolean": one_turn(-0.1, True),
    "count-mismatch": one_turn(-0.1, tokens=2),
    "no-turns": [],
    "second-turn": [*one_turn(-0.1), Turn([1, 10, 20], [30], [NAN])],
}
PREFIX_CASES = {
    "consistent": turns(),
    "drift": turns(drift=True),
    "single-turn": turns()[:1],
    "no-turns": [],
    "prompt-shorter-than-history": [Turn([1, 2], [3, 4], [-0.1, -0.1]), Turn([1, 2, 3], [5], [-0.1])],
    "first-token-differs": [Turn([1], [2], [-0.1]), Turn([9, 2, 3], [4], [-0.1])],
}


def chained(*messages: str, cause: bool = True) -> BaseException:
    """An exception whose cause (or context) chain carries ``messages``, outermost first."""
    error: BaseException | None = None
    for message in reversed(messages):
        outer = RuntimeError(message)
        if cause:
            outer.__cause__ = error
        else:
            outer.__context__ = error
        error = outer
    assert error is not None
    return error


def cycle() -> BaseException:
    first, second = ValueError("a"), KeyError("b")
    first.__context__, second.__context__ = second, first
    return first


CHAIN_CASES = {
    "alone": ValueError("x"),
    "cause": chained("outer", "middle", "inner"),
    "context": chained("outer", "inner", cause=False),
    "cycle": cycle(),
    "cancelled": asyncio.CancelledError(),
}


@pytest.mark.parametrize("case", LOGPROB_CASES.values(), ids=list(LOGPROB_CASES))
def test_the_collector_and_the_judge_agree_on_logprobs(case: Sequence[Turn]) -> None:
    assert results.bad_logprob(case) == rules.bad_logprob(case)


@pytest.mark.parametrize("case", PREFIX_CASES.values(), ids=list(PREFIX_CASES))
def test_the_collector_and_the_judge_agree_on_prefixes(case: Sequence[Turn]) -> None:
    assert results.prefix_mismatch(case) == rules.prefix_mismatch(case)


@pytest.mark.parametrize("case", CHAIN_CASES.values(), ids=list(CHAIN_CASES))
def test_the_collector_and_the_judge_walk_the_same_cause_chain(case: BaseException) -> None:
    assert [id(link) for link in failures.chain(case)] == [id(link) for link in rules.chain(case)]


@pytest.mark.parametrize(
    "error",
    [
        *CHAIN_CASES.values(),
        GymRequestError("calculator_agent", "http://127.0.0.1:1/run", 500, "ValueError('row 1')"),
        RuntimeError(""),
    ],
)
def test_the_root_cause_the_collector_writes_is_informative_to_the_judge(error: BaseException) -> None:
    assert rules.informative(failures.root_cause(error))


def test_the_judges_rules_say_where_and_what() -> None:
    assert rules.bad_logprob(LOGPROB_CASES["finite"]) is None
    assert rules.bad_logprob(LOGPROB_CASES["boolean"]) == "non-finite logprob True at turn 0, token 1"
    assert rules.bad_logprob(LOGPROB_CASES["second-turn"]) == "non-finite logprob nan at turn 1, token 0"
    assert (
        rules.bad_logprob(LOGPROB_CASES["count-mismatch"]) == "turn 0 has 1 logprobs for 2 generated tokens"
    )
    assert rules.prefix_mismatch(PREFIX_CASES["drift"]) == (
        "prefix mismatch at turn 1: prompt ids differ from turn 0's prompt + generation at position 4 (of 6)"
    )
    assert rules.prefix_mismatch(PREFIX_CASES["prompt-shorter-than-history"]) == (
        "prefix mismatch at turn 1: prompt ids differ from turn 0's prompt + generation at position 3 (of 4)"
    )
    assert [str(link) for link in rules.chain(CHAIN_CASES["cause"])] == ["outer", "middle", "inner"]
    assert [str(link) for link in rules.chain(CHAIN_CASES["cycle"])] == ["a", "'b'"]


def test_first_mismatch_reports_the_position() -> None:
    assert rules.first_mismatch([1, 2, 3], [1, 2]) is None
    assert rules.first_mismatch([1, 9, 3], [1, 2]) == 1
    assert rules.first_mismatch([1], [1, 2]) == 1
    assert rules.first_mismatch([4, 5], []) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, False),
        ("", False),
        ("  CancelledError: ", False),
        ("TimeoutError", False),
        ("HTTP 500 on row 3", True),
    ],
)
def test_informative_texts_name_something(text: str | None, expected: bool) -> None:
    assert rules.informative(text) is expected


def test_hidden_root_causes() -> None:
    assert rules.hides_root_cause(asyncio.CancelledError("the agent died"))
    assert rules.hides_root_cause(chained("", "", cause=False))
    assert not rules.hides_root_cause(chained("", "row 3: HTTP 500"))


def _accepts_nan(turns: Sequence[Turn]) -> str | None:
    return None


def _accepts_drift(turns: Sequence[Turn]) -> str | None:
    return None


def test_the_judge_shares_no_function_object_with_the_collector() -> None:
    # A shared object would carry one bug into both: the collector would pass what the judge passes.
    collector = {
        id(value)
        for module in (results, failures)
        for value in vars(module).values()
        if inspect.isfunction(value)
    }
    shared = [
        name for name, value in vars(rules).items() if inspect.isfunction(value) and id(value) in collector
    ]
    assert shared == [], f"invariants.rules shares {shared} with the reference collector"


def test_a_logprob_bug_planted_in_the_collector_is_still_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    # The bug goes into the function object itself, as a wrong line in its source would: every
    # name bound to it sees it. Had the invariant imported the collector's function, it would pass.
    monkeypatch.setattr(results.bad_logprob, "__code__", _accepts_nan.__code__)
    nan_turns = turns(nan=True)
    assert results.bad_logprob(nan_turns) is None
    verdict = FiniteLogprobs().check(observe(2, [rollout(0), rollout(1, turns=nan_turns)]))
    assert verdict.status is Status.FAIL
    assert verdict.evidence[0] == "row 1 (completed, 1 attempts): non-finite logprob nan at turn 0, token 2"


@pytest.mark.asyncio
async def test_a_reference_collector_with_that_bug_hands_nan_over_and_fails_finite_logprobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(results.bad_logprob, "__code__", _accepts_nan.__code__)
    requested = rows(3)
    ctx = context(FakeGym({1: ["nan"]}))
    returned: list[Rollout] = await ReferenceCollector(ctx).collect(requested, mode="train")
    assert [r.status for r in returned] == ["completed", "completed", "completed"]  # the bug is live
    observation = Observation(requested, returned, None, ctx.history, deadline_s=10.0, elapsed_s=1.0)
    verdict = FiniteLogprobs().check(observation)
    assert verdict.status is Status.FAIL
    assert verdict.evidence[0] == "row 1 (completed, 1 attempts): non-finite logprob nan at turn 0, token 1"


def test_a_prefix_bug_planted_in_the_collector_is_still_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results.prefix_mismatch, "__code__", _accepts_drift.__code__)
    drifted = turns(drift=True)
    assert results.prefix_mismatch(drifted) is None
    verdict = PrefixConsistent().check(observe(1, [rollout(0, turns=drifted)]))
    assert verdict.status is Status.FAIL
    assert verdict.evidence[0].startswith("row 0: prefix mismatch at turn 1")


def test_a_chain_bug_planted_in_the_collector_is_still_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    def outer_only(error: BaseException) -> object:
        yield error

    monkeypatch.setattr(failures.chain, "__code__", outer_only.__code__)
    error = chained("", "row 3: HTTP 500")
    assert [str(link) for link in failures.chain(error)] == [""]
    verdict = RootCauseVisible().check(observe(1, None, raised=error))
    assert verdict.status is Status.PASS
    assert RootCauseVisible().check(observe(1, None, raised=chained("", ""))).status is Status.FAIL


def test_digests_agree_within_the_tolerance_and_at_the_same_bad_position() -> None:
    real = logprob_digest([-0.5, -1.25, -3.0])
    assert rules.digests_agree(real, logprob_digest([-0.5000001, -1.25, -3.0]))
    assert not rules.digests_agree(real, logprob_digest([-0.5, -1.25, 0.0]))
    assert not rules.digests_agree(real, logprob_digest([-1.25, -0.5, -3.0])), "the same values, reordered"
    assert not rules.digests_agree(real, logprob_digest([-0.5, -1.25]))
    assert rules.digests_agree(logprob_digest([1.0, math.nan]), logprob_digest([2.0, math.inf]))
    assert not rules.digests_agree(logprob_digest([1.0, math.nan]), logprob_digest([math.nan, 1.0]))


def test_the_splice_owed_is_the_reference_splice_where_the_prefix_ends_on_the_eos() -> None:
    cases = [
        ([1, 5, 2], [1, 6, 2, 9]),
        ([1, 2, 7, 2], [1, 2, 8, 2, 9, 10]),
        ([1, 5, 2], [1, 5, 3, 9]),  # no boundary
        ([1, 5, 2], [1, 5, 2]),  # nothing after the boundary
        ([], [4, 5]),
    ]
    for prefix, template in cases:
        try:
            expected: list[int] | None = splice(prefix, template, [EOS])
        except SpliceError:
            expected = None
        assert rules.splice_owed(prefix, template) == expected, (prefix, template)
