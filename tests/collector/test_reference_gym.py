"""The reference collector's gym style against a scripted in-process Gym runner."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rollout_chaos.collector import abilities
from pytest_rollout_chaos.collector.protocol import (
    CollectionError,
    EmptyTrainBatchError,
    InfrastructureError,
    ShortCountError,
    TooManyAbortedError,
)
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from tests.collector._fake_gym import FakeGym, context, rows

pytestmark = pytest.mark.asyncio


async def test_every_row_completes_in_row_order_and_is_recorded() -> None:
    ctx = context(FakeGym())
    rollouts = await ReferenceCollector(ctx).collect(rows(4), mode="train")
    assert [r.row_index for r in rollouts] == [0, 1, 2, 3]
    assert {r.status for r in rollouts} == {"completed"}
    assert len(rollouts[0].turns) == 2
    assert rollouts[0].reward == 1.0
    ops = [(e.kind, e.op) for e in ctx.history.events(source="collector")]
    assert ops[0] == ("invoke", "collect")
    assert ops[-1] == ("ok", "collect")
    assert ops.count(("info", "rollout")) == 4


async def test_concurrency_is_bounded_and_declared_so() -> None:
    gym = FakeGym(delay_s=0.01)
    ctx = context(gym, max_concurrency=2)
    collector = ReferenceCollector(ctx)
    await collector.collect(rows(6), mode="train")
    assert gym.max_in_flight == 2
    # what concurrency_bounded holds it to; without it, that invariant could not judge the reference
    assert abilities.concurrency_limit(collector, ctx.settings) == 2
    assert abilities.own_concurrency(collector) is None


async def test_one_failing_trajectory_is_aborted_with_its_root_cause() -> None:
    rollouts = await ReferenceCollector(context(FakeGym({1: ["error"]}))).collect(rows(4), mode="train")
    assert [r.status for r in rollouts] == ["completed", "aborted", "completed", "completed"]
    assert rollouts[1].error is not None
    assert "HTTP 500" in rollouts[1].error
    assert "ValueError('row 1')" in rollouts[1].error


async def test_a_group_with_an_aborted_member_is_left_out_of_training_whole() -> None:
    grouped = [
        {**row, "_rowidx": 4 * prompt + member} for prompt, row in enumerate(rows(2)) for member in range(4)
    ]
    ctx = context(FakeGym({5: ["error"]}))
    rollouts = await ReferenceCollector(ctx).collect(grouped, mode="train")
    assert [r.status for r in rollouts] == ["completed"] * 5 + ["aborted"] + ["completed"] * 2
    assert [r.in_train_batch for r in rollouts] == [True] * 4 + [False] * 4
    [dropped] = ctx.history.events(source="collector", op="group_dropped")
    assert dropped.data["rows"] == [4, 5, 6, 7]
    assert dropped.data["failed"] == [5]
    assert "HTTP 500" in dropped.data["errors"][0]


async def test_every_group_left_out_is_an_empty_step_and_fails_the_collection() -> None:
    """Two groups of four, one aborted member each: 2 of 8 is under the aborted bound, yet nothing
    is left to train on (a fuzz draw of ``run-answers-unreadable`` found the reference returning it)."""
    grouped = [
        {**row, "_rowidx": 4 * prompt + member} for prompt, row in enumerate(rows(2)) for member in range(4)
    ]
    ctx = context(FakeGym({1: ["error"], 6: ["error"]}))
    with pytest.raises(
        EmptyTrainBatchError,
        match=r"nothing to train on: every GRPO group has an aborted member \(rows \[1, 6\]\).*6 rollouts"
        r".*1x .*HTTP 500: ValueError\(.row 1.\)",
    ):
        await ReferenceCollector(ctx).collect(grouped, mode="train")
    assert len(ctx.history.events(source="collector", op="group_dropped")) == 2


async def test_short_count_raises_at_once_naming_requested_and_returned() -> None:
    gym = FakeGym(delay_s=5.0)
    gym.short_by = 1
    with pytest.raises(ShortCountError, match=r"requested 1 result for row 0 but the Gym client returned 0"):
        async with asyncio.timeout(2.0):  # at once: long before any row could finish
            await ReferenceCollector(context(gym)).collect(rows(3), mode="train")


async def test_a_short_count_keeps_its_rows_permit_so_no_sibling_starts_in_its_place() -> None:
    # the real Gym client started row 0's /run before it handed back nothing to await: that request
    # may still run, so its permit is not given to row 2 while the batch fails
    gym = FakeGym(delay_s=5.0)
    gym.short_by = 1
    with pytest.raises(ShortCountError):
        await ReferenceCollector(context(gym, max_concurrency=2)).collect(rows(4), mode="train")
    assert sorted(gym.calls) == [1]


async def test_unreachable_agent_fails_fast() -> None:
    gym = FakeGym({2: ["refused"]}, delay_s=0.0)
    ctx = context(gym)
    with pytest.raises(
        InfrastructureError,
        match=r"agent .* unreachable while running row 2.*Cannot connect.*rows in flight: \[.*2.*\]",
    ):
        await ReferenceCollector(ctx).collect(rows(4), mode="train")
    assert gym.calls[2] == 1
    assert ctx.history.events(source="collector", kind="fail", op="collect")


async def test_too_many_aborted_fails_the_collection() -> None:
    gym = FakeGym({0: ["error"], 1: ["error"], 2: ["error"]})
    with pytest.raises(
        TooManyAbortedError, match=r"3 of 4 rollouts aborted \(rows \[.*\]\), above max_aborted_fraction=0.5"
    ):
        await ReferenceCollector(context(gym)).collect(rows(4), mode="train")


async def test_nan_is_retried_for_the_affected_row_only() -> None:
    gym = FakeGym({1: ["nan", "ok"]})
    ctx = context(gym)
    rollouts = await ReferenceCollector(ctx).collect(rows(3), mode="train")
    assert rollouts[1].status == "completed"
    assert rollouts[1].attempts == 2
    assert gym.calls == {0: 1, 1: 2, 2: 1}
    assert len(ctx.history.events(source="collector", op="retry")) == 1


async def test_persistent_null_logprobs_abort_after_a_bounded_number_of_attempts() -> None:
    gym = FakeGym({0: ["null"]})
    rollouts = await ReferenceCollector(context(gym, max_logprob_attempts=3)).collect(rows(3), mode="train")
    assert rollouts[0].status == "aborted"
    assert rollouts[0].attempts == 3
    assert "non-finite logprob None at turn 0, token 1" in (rollouts[0].error or "")
    assert gym.calls[0] == 3


async def test_prefix_drift_is_spliced_or_aborted() -> None:
    gym = FakeGym({0: ["drift"], 1: ["bad_drift"]})
    rollouts = await ReferenceCollector(context(gym)).collect(rows(3), mode="train")
    repaired = rollouts[0]
    assert repaired.status == "completed"
    assert repaired.turns[1].prompt_token_ids == [1, 10, 20, 21, 2, 30]
    assert rollouts[1].status == "aborted"
    assert "prefix mismatch at turn 1 not repairable" in (rollouts[1].error or "")


async def test_a_hung_row_meets_its_request_deadline() -> None:
    gym = FakeGym({0: ["hang"]})
    rollouts = await ReferenceCollector(context(gym, request_timeout_s=0.2)).collect(rows(3), mode="train")
    assert rollouts[0].status == "aborted"
    assert "within request_timeout_s=0.2" in (rollouts[0].error or "")


async def test_the_collection_has_a_deadline() -> None:
    gym = FakeGym({0: ["hang"], 1: ["hang"]})
    collector = ReferenceCollector(context(gym, request_timeout_s=30, collect_timeout_s=0.2))
    with pytest.raises(CollectionError, match=r"did not finish within collect_timeout_s=0.2"):
        await collector.collect(rows(2), mode="train")


async def test_cancelling_the_collection_propagates() -> None:
    gym = FakeGym({0: ["hang"]})
    ctx = context(gym)
    task = asyncio.ensure_future(ReferenceCollector(ctx).collect(rows(2), mode="train"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ctx.history.events(source="collector", kind="fail", op="collect")


async def test_repeated_row_indices_are_rejected() -> None:
    batch = rows(2)
    batch[1]["_rowidx"] = 0
    with pytest.raises(ValueError, match=r"rows repeat _rowidx values \[0\]"):
        await ReferenceCollector(context(FakeGym())).collect(batch, mode="train")
