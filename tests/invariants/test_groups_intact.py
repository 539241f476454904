"""``groups_intact`` over hand-built groups: each group of ``generations_per_prompt`` rows reaches the
train batch whole and sound, or not at all."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.invariants.base import Observation, Status
from pytest_rollout_chaos.invariants.groups_intact import GroupsIntact
from tests.invariants._builders import observe, rollout
from tests.invariants._records import answered, run_answered

CHECK = GroupsIntact()


def grouped(n: int, rollouts: list[Rollout | None] | None, *, size: int = 4, **kwargs: Any) -> Observation:
    return replace(observe(n, rollouts, **kwargs), generations_per_prompt=size)


def member(index: int, *, trained: bool = True, **kwargs: Any) -> Rollout:
    return replace(rollout(index, **kwargs), in_train_batch=trained)


def placeholder(index: int, *, trained: bool) -> Rollout:
    """A crashed member: aborted, reward 0, its loss mask zeroed (out of the batch) or not."""
    return Rollout(index, "aborted", 0.0, [], "HTTP 500 from the agent", in_train_batch=trained)


def test_whole_groups_pass_and_a_group_left_out_whole_passes() -> None:
    dropped = [member(i, trained=False) for i in range(4)]
    dropped[2] = placeholder(2, trained=False)
    rollouts: list[Rollout | None] = [*dropped, *(member(i) for i in range(4, 8))]
    result = CHECK.check(grouped(8, rollouts, history=answered(8, failed=(2,))))
    assert result.status is Status.PASS
    assert result.summary == (
        "1 of the 2 groups of 4 reached the train batch whole, each member a real generation; the "
        "others were left out whole"
    )


def test_a_placeholder_left_out_while_its_siblings_train_fails() -> None:
    rollouts: list[Rollout | None] = [member(i) for i in range(8)]
    rollouts[2] = placeholder(2, trained=False)
    result = CHECK.check(grouped(8, rollouts, history=answered(8, failed=(2,))))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "group of rows 0..3: 3 members in the train batch, rows [2] left out: row 2 aborted with reward "
        "0.0 (HTTP 500 from the agent); the group's baseline still counts the missing members' "
        "placeholders, or the group is split",
    )
    assert "1 of the 2 groups of 4 reached training with a failed member" in result.summary


def test_a_placeholder_inside_the_batch_or_a_member_no_run_answered_fails() -> None:
    rollouts: list[Rollout | None] = [member(i) for i in range(8)]
    rollouts[5] = placeholder(5, trained=True)
    inside = CHECK.check(grouped(8, rollouts, history=answered(8, failed=(5,))))
    assert inside.status is Status.FAIL
    assert inside.evidence == (
        "group of rows 4..7 is in the train batch whole with a failed member: row 5 aborted with reward "
        "0.0 (HTTP 500 from the agent)",
    )
    faked = CHECK.check(grouped(8, [member(i) for i in range(8)], history=answered(8, failed=(1,))))
    assert faked.status is Status.FAIL
    assert faked.evidence == (
        "group of rows 0..3 is in the train batch whole with a failed member: row 1 is completed with "
        "reward 1.0, but no /run of it succeeded (HTTP 500)",
    )


def test_a_member_completed_by_a_retry_keeps_its_group_whole() -> None:
    history = answered(4)
    run_answered(history, 1, status=500)  # a failed attempt before or after: one succeeded
    assert CHECK.check(grouped(4, [member(i) for i in range(4)], history=history)).status is Status.PASS


def test_a_lost_member_splits_its_group() -> None:
    rollouts: list[Rollout | None] = [member(0), member(1), None, member(3)]
    result = CHECK.check(grouped(4, rollouts, history=answered(4)))
    assert result.status is Status.FAIL
    assert "rows [2] left out: row 2 came back as nothing" in result.evidence[0]


def test_a_collector_that_does_not_say_trains_on_its_rollouts_not_aborted() -> None:
    rollouts: list[Rollout | None] = [rollout(i) for i in range(4)]
    rollouts[3] = Rollout(3, "aborted", 0.0, [], "HTTP 500")
    assert CHECK.check(grouped(4, rollouts, history=answered(4, failed=(3,)))).status is Status.FAIL


def test_a_raise_holds_and_one_generation_per_prompt_is_not_judged() -> None:
    raised = CHECK.check(grouped(8, None, raised=RuntimeError("agent died")))
    assert (raised.status, raised.summary) == (Status.PASS, "the step raised; no group reached the trainer")
    single = CHECK.check(grouped(2, [member(0), placeholder(1, trained=False)], size=1))
    assert single.status is Status.NOT_JUDGED
    assert single.summary == "one generation per prompt: every group has one member"
    cut = CHECK.check(grouped(8, None, timed_out=True))
    assert cut.status is Status.NOT_JUDGED


def test_rows_that_do_not_split_into_groups_are_unknown() -> None:
    result = CHECK.check(grouped(6, [member(i) for i in range(6)], history=answered(6)))
    assert result.status is Status.UNKNOWN
    assert result.summary == "6 rows do not split into groups of generations_per_prompt=4"


def test_a_sound_group_with_a_reward_spread_left_out_fails_and_one_with_equal_rewards_passes() -> None:
    """Over-dropping: a failure in one group must not cost a sound group its step. A group whose
    rewards are all equal has no advantage to give, and leaving it out (dynamic sampling) holds."""
    failed = [member(i, trained=False) for i in range(4)]
    failed[1] = placeholder(1, trained=False)
    spread = [member(i, trained=False, reward=0.25 * (i % 4)) for i in range(4, 8)]
    result = CHECK.check(grouped(8, [*failed, *spread], history=answered(8, failed=(1,))))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "group of rows 4..7 was left out of the train batch whole, though every member is a real "
        "generation and their rewards differ (0, 0.25, 0.5, 0.75): a group with something to teach dropped",
    )
    assert (
        "1 of the 2 groups of 4, every member a real generation and their rewards different" in result.summary
    )
    equal = [member(i, trained=False, reward=0.0) for i in range(4, 8)]
    assert CHECK.check(grouped(8, [*failed, *equal], history=answered(8, failed=(1,)))).status is Status.PASS
