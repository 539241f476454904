"""Property: under any single-fault schedule, the reference collector never loses a row, never
hangs, and either returns one rollout per row or raises a named error."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings

from pytest_rollout_chaos.collector import reference
from pytest_rollout_chaos.collector.protocol import CollectionError
from pytest_rollout_chaos.engine import retarget
from pytest_rollout_chaos.engine.run import run_once
from pytest_rollout_chaos.engine.verdicts import judge
from pytest_rollout_chaos.errors import ChaosError
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.scenario.model import Expectation, FaultStep, Scenario, Workload
from pytest_rollout_chaos.scenario.strategies import fault_schedules
from pytest_rollout_chaos.stack import ChaosStack

ROWS = 4
# Ray's faults need the servers in Ray actors (tests/ray and the catalog on Ray cover them).
WITHOUT_RAY = tuple(kind for kind, cls in registry.FAULTS.items() if cls.family != "ray")
WITHIN_S = 12.0
NAMED_ERRORS = (CollectionError, ChaosError)

pytestmark = pytest.mark.slow


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,  # the same schedules on every run: this is a gate, not a search
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(schedule=fault_schedules(min_steps=1, max_steps=1, total_rollouts=ROWS, kinds=WITHOUT_RAY))
def test_reference_collector_under_any_single_fault(
    chaos_stack: ChaosStack, schedule: list[FaultStep]
) -> None:
    scenario = Scenario(
        name="property",
        description="one drawn fault",
        expect=Expectation(invariants=("accounted", "no_silent_short_count", "bounded"), within_s=WITHIN_S),
        workload=Workload(rows_per_task=ROWS),
        faults=tuple(schedule),
    )
    chaos_stack.reset()
    unmoved = retarget.Retargeted(scenario)  # the reference moves no fault
    result = run_once(scenario, chaos_stack, reference.factory, seed=0, target=None, retargeted=unmoved)
    judge(result)
    step = schedule[0].describe()
    assert not result.fault_errors, f"{step}: the harness could not apply it: {result.fault_errors}"
    assert not result.timed_out, f"{step}: the reference collector hung past {WITHIN_S}s"
    for verdict in result.verdicts:  # the standing ones may find nothing to judge under some faults
        assert verdict.status in (Status.PASS, Status.NOT_JUDGED), f"{step}: {verdict.render()}"
    assert not result.vacuous, f"{step}: {result.vacuous}"
    if result.raised is not None and schedule[0].kind == "cancel":
        # cancelled from outside: CancelledError is the answer cancel_honoured asks for
        assert isinstance(result.raised, asyncio.CancelledError), f"{step}: {result.raised!r}"
    elif result.raised is not None:
        assert isinstance(result.raised, NAMED_ERRORS), f"{step}: unnamed error {result.raised!r}"
        assert not isinstance(result.raised, asyncio.CancelledError)
        assert str(result.raised), f"{step}: {type(result.raised).__name__} without a message"
    else:
        assert result.rollouts is not None
        assert sorted(rollout.row_index for rollout in result.rollouts) == list(range(ROWS)), step
