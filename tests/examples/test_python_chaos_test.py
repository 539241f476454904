"""The docs' Python example ("Writing a scenario"): a chaos test written with the fixtures instead of YAML."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos import Collector, CollectorContext, FaultInjector
from pytest_rollout_chaos.servers.gym.stack import GymStack

pytestmark = pytest.mark.slow  # both tests start the whole stack


@pytest.mark.asyncio
@pytest.mark.chaos_fault("trajectory_exception", "agent", row=1, message="parser crashed")
async def test_one_bad_trajectory_is_isolated(chaos_collector: Collector, chaos_gym: GymStack) -> None:
    rows = chaos_gym.rows("calculator", 4)
    rollouts = await chaos_collector.collect(rows, mode="train")
    aborted = [rollout for rollout in rollouts if rollout.status == "aborted"]
    assert [rollout.row_index for rollout in aborted] == [1]
    assert aborted[0].error is not None
    assert "parser crashed" in aborted[0].error
    assert len(rollouts) == 4


@pytest.mark.asyncio
async def test_a_slow_model_link_only_slows_things_down(
    chaos_collector: Collector,
    chaos_collector_context: CollectorContext,
    chaos_gym: GymStack,
    chaos_faults: FaultInjector,
) -> None:
    rows = chaos_gym.rows("echo", 4)
    async with chaos_faults.applied("latency", "agent->model", latency_ms=100):
        rollouts = await chaos_collector.collect(rows, mode="train")
    assert sorted(rollout.row_index for rollout in rollouts) == [0, 1, 2, 3]
    assert {rollout.status for rollout in rollouts} <= {"completed", "truncated"}
    faults = chaos_collector_context.history.events(source="fault")
    assert [(event.op, event.data["fault"]) for event in faults] == [
        ("inject", "latency"),
        ("heal", "latency"),
    ]
