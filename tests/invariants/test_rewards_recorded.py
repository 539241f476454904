"""``rewards_recorded`` against hand-built Histories holding the fault layer's record: each reward is
the one its row's ``/run`` answered (in native style, the sum of what the environment answered it)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_rollout_chaos.collector.protocol import Turn
from pytest_rollout_chaos.history import History, fingerprint
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.rewards_recorded import RewardsRecorded
from tests.invariants._builders import observe, rollout, turns
from tests.invariants._records import answered, run_answered


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


def test_native_rewards_are_held_to_the_verify_answers_on_the_collectors_own_link() -> None:
    """SkyRL's environment scores each trajectory by ``/verify`` itself: the layer's record of those
    answers, tied to rows by ``_rowidx``, is what the environment answered; an agent's are not."""
    history = native_answered([])
    for link, row, reward in (("collector->resources", 0, 1.0), ("collector->resources", 1, 0.25)):
        facts = {"link": link, "server": "resources", "row": row, "status": 200, "reward": reward}
        history.append("resources", "ok", "POST /verify", facts)
    history.append("resources", "ok", "POST /verify", {"link": "agent->resources", "row": 1, "reward": 9.0})
    kept = [rollout(0, reward=1.0), rollout(1, reward=0.25)]
    result = RewardsRecorded().check(observe(2, kept, history=history))
    assert result.status is Status.PASS, result.summary
    swapped = [rollout(0, reward=0.25), rollout(1, reward=1.0)]
    result = RewardsRecorded().check(observe(2, swapped, history=history))
    assert result.status is Status.FAIL
    assert result.evidence[0] == (
        "row 0: reward 0.25, but the environment answered the row rewards [1.0] (sum 1.0)"
    )
