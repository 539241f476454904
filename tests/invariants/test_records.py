"""``logprobs_generated``, ``rewards_recorded`` and ``attempts_bounded`` against hand-built Histories
holding the fault layer's record: the collector's logprobs, rewards and attempts held against what
the servers answered, row by row."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from pytest_rollout_chaos.collector.protocol import Turn
from pytest_rollout_chaos.history import History, fingerprint, logprob_digest
from pytest_rollout_chaos.invariants.attempts_bounded import AttemptsBounded
from pytest_rollout_chaos.invariants.base import Observation, Status
from pytest_rollout_chaos.invariants.logprobs_generated import LogprobsGenerated
from pytest_rollout_chaos.invariants.rewards_recorded import RewardsRecorded
from pytest_rollout_chaos.invariants.rules import digests_agree
from tests.invariants._builders import observe, rollout, turns

LINK = "collector->agent:calculator_agent"


def run_answered(
    history: History,
    row: int,
    answered: Sequence[Turn] | None = None,
    *,
    reward: float = 1.0,
    status: int | None = 200,
) -> None:
    """What the layer writes for one ``/run``: invoke, then ok with fingerprints, logprob digests and
    the reward (or fail with a status, or info with none when the connection was cut)."""
    facts = {"link": LINK, "server": "calculator_agent", "row": row}
    history.append("agent", "invoke", "POST /run", facts)
    if status is None:
        history.append("agent", "info", "POST /run", {**facts, "error": "cut"})
        return
    if status >= 400:
        history.append("agent", "fail", "POST /run", {**facts, "status": status})
        return
    generated = turns() if answered is None else answered
    data = {
        **facts,
        "status": status,
        "generations": [fingerprint(turn.generation_token_ids) for turn in generated],
        "logprobs": [logprob_digest(turn.generation_log_probs) for turn in generated],
        "reward": reward,
    }
    history.append("agent", "ok", "POST /run", data)


def answered(rows: int) -> History:
    history = History()
    for row in range(rows):
        run_answered(history, row)
    return history


def with_limit(observation: Observation, limit: int = 3) -> Observation:
    return replace(observation, max_attempts=limit)


def zeroed(given: Sequence[Turn]) -> list[Turn]:
    """``nan_to_num``: every non-finite logprob replaced by 0.0."""
    return [
        replace(
            turn, generation_log_probs=[v if math.isfinite(v) else 0.0 for v in turn.generation_log_probs]
        )
        for turn in given
    ]


# -- logprobs_generated -----------------------------------------------------------------------


def test_logprobs_as_the_model_reported_them_pass_also_as_float32() -> None:
    history = answered(2)
    assert (
        LogprobsGenerated().check(observe(2, [rollout(0), rollout(1)], history=history)).status is Status.PASS
    )
    rounded = [replace(t, generation_log_probs=[v + 3e-8 for v in t.generation_log_probs]) for t in turns()]
    result = LogprobsGenerated().check(observe(1, [rollout(0, turns=rounded)], history=answered(1)))
    assert result.status is Status.PASS


def test_nan_logprobs_replaced_by_zero_fail_with_the_row_and_turn() -> None:
    history = History()
    run_answered(history, 0, turns(nan=True))  # what the server answered, NaN and all
    result = LogprobsGenerated().check(
        observe(1, [rollout(0, turns=zeroed(turns(nan=True)))], history=history)
    )
    assert result.status is Status.FAIL
    assert "hand back logprobs the model never reported" in result.summary
    assert result.evidence[0].startswith("row 0: turns [0] hand back logprobs ['3:-0.300000:-0.500000']")
    assert result.evidence[0].endswith("where the row's /run answered ['3:x2']")


def test_a_nan_passed_through_is_finite_logprobs_business_not_this_one() -> None:
    history = History()
    run_answered(history, 0, turns(nan=True))
    result = LogprobsGenerated().check(observe(1, [rollout(0, turns=turns(nan=True))], history=history))
    assert result.status is Status.PASS


def test_a_retry_is_judged_by_the_answer_it_took() -> None:
    history = History()
    run_answered(history, 0, turns(nan=True))
    run_answered(history, 0, turns())
    assert LogprobsGenerated().check(observe(1, [rollout(0)], history=history)).status is Status.PASS


def test_invented_logprobs_in_native_style_fail() -> None:
    history = History()
    for turn in turns():
        data = {
            "link": "collector->policy",
            "server": "policy",
            "row": 0,
            "status": 200,
            "generations": [fingerprint(turn.generation_token_ids)],
            "logprobs": [logprob_digest(turn.generation_log_probs)],
        }
        history.append("policy", "ok", "POST /v1/chat/completions", data)
    invented = [
        replace(turn, generation_log_probs=[0.0] * len(turn.generation_log_probs)) for turn in turns()
    ]
    result = LogprobsGenerated().check(observe(1, [rollout(0, turns=invented)], history=history))
    assert result.status is Status.FAIL
    assert result.evidence[0].startswith("row 0 (count:sum:weighted sum): turn 0: 3:0.000000:0.000000")


def test_without_a_record_of_logprobs_it_is_not_judged() -> None:
    assert LogprobsGenerated().check(observe(1, [rollout(0)])).status is Status.NOT_JUDGED


def test_digests_agree_within_the_tolerance_and_at_the_same_bad_position() -> None:
    real = logprob_digest([-0.5, -1.25, -3.0])
    assert digests_agree(real, logprob_digest([-0.5000001, -1.25, -3.0]))
    assert not digests_agree(real, logprob_digest([-0.5, -1.25, 0.0]))
    assert not digests_agree(real, logprob_digest([-1.25, -0.5, -3.0])), "the same values, reordered"
    assert not digests_agree(real, logprob_digest([-0.5, -1.25]))
    assert digests_agree(logprob_digest([1.0, math.nan]), logprob_digest([2.0, math.inf]))
    assert not digests_agree(logprob_digest([1.0, math.nan]), logprob_digest([math.nan, 1.0]))


# -- rewards_recorded -------------------------------------------------------------------------


def test_rewards_as_their_rows_run_answered_pass() -> None:
    history = History()
    run_answered(history, 0, reward=0.0)
    run_answered(history, 1, reward=1.0)
    observation = observe(2, [rollout(0, reward=0.0), rollout(1, reward=1.0)], history=history)
    assert RewardsRecorded().check(observation).status is Status.PASS


def test_a_reward_from_another_row_fails_with_both_values() -> None:
    history = History()
    run_answered(history, 0, reward=0.0)
    run_answered(history, 1, reward=1.0)
    observation = observe(2, [rollout(0, reward=0.0), rollout(1, reward=0.0)], history=history)
    result = RewardsRecorded().check(observation)
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1: reward 0.0, but the row's /run that generated its turns and their logprobs answered "
        "reward 1.0",
    )


def test_the_reward_of_the_attempt_handed_on_not_of_another_attempt_of_the_row() -> None:
    history = History()
    run_answered(history, 0, turns(nan=True), reward=1.0)  # the same ids, a NaN logprob: retried
    run_answered(history, 0, turns(), reward=1.1)  # scored again, another reward
    handed = RewardsRecorded().check(observe(1, [rollout(0, reward=1.1, attempts=2)], history=history))
    assert handed.status is Status.PASS, handed.summary
    first = RewardsRecorded().check(observe(1, [rollout(0, reward=1.0, attempts=2)], history=history))
    assert first.status is Status.FAIL
    assert first.evidence == (
        "row 0: reward 1.0, but the row's /run that generated its turns and their logprobs answered "
        "reward 1.1 (its other attempts answered [1.0])",
    )


def test_turns_no_answer_generated_are_held_against_every_answer_of_the_row() -> None:
    other = [Turn([1], [40, 41], [-0.1, -0.2])]
    same = RewardsRecorded().check(observe(1, [rollout(0, turns=other, reward=1.0)], history=answered(1)))
    assert same.status is Status.PASS
    assert "all 1 completed or truncated rollouts" in same.summary
    result = RewardsRecorded().check(observe(1, [rollout(0, turns=other, reward=5.0)], history=answered(1)))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 0: reward 5.0, but no /run answered row 0 with it (its /run answered rewards [1.0])",
    )


def test_a_completed_rollout_with_a_reward_and_no_turns_fails_when_its_row_never_answered() -> None:
    history = answered(5)
    run_answered(history, 5, status=500)
    outcome = [rollout(row) for row in range(5)] + [rollout(5, turns=[], reward=0.0)]
    result = RewardsRecorded().check(observe(6, outcome, history=history))
    assert result.status is Status.FAIL
    assert result.evidence == ("row 5: reward 0.0, but no /run answered row 5 with a reward",)
    assert "1 rollouts carry a reward" in result.summary


def native_answered(env: Sequence[tuple[list[object], list[object]]]) -> History:
    """A native collection's record: one model call per row on the collector's link, then what the
    environment answered each ``/step_batch`` (its items' rows and rewards)."""
    history = History()
    for row in (0, 1):
        facts = {"link": "collector->policy", "server": "policy", "row": row, "status": 200}
        generated = [fingerprint(turn.generation_token_ids) for turn in turns()]
        history.append("policy", "ok", "POST /v1/chat/completions", {**facts, "generations": generated})
    for rows, rewards in env:
        history.append("resources", "ok", "step_batch_rewards", {"rows": rows, "rewards": rewards})
    return history


def test_native_rewards_are_the_sum_of_what_the_environment_answered_the_row() -> None:
    history = native_answered([([0, 1], [0.0, 0.0]), ([0, 1], [1.25, 0.25])])
    summed = [rollout(0, reward=1.25), rollout(1, reward=0.25)]
    result = RewardsRecorded().check(observe(2, summed, history=history))
    assert result.status is Status.PASS, result.summary
    kept = [rollout(0, reward=1.25), rollout(1, reward=0.0)]  # an earlier score kept
    result = RewardsRecorded().check(observe(2, kept, history=history))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1: reward 0.0, but the environment answered the row rewards [0.0, 0.25] (sum 0.25)",
    )


def test_native_rewards_with_no_environment_record_tied_to_rows_are_not_judged() -> None:
    untied = native_answered([([None, None], [1.0, 1.0])])
    result = RewardsRecorded().check(observe(2, [rollout(0), rollout(1)], history=untied))
    assert result.status is Status.NOT_JUDGED
    assert "native style" in result.summary


# -- attempts_bounded -------------------------------------------------------------------------


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
