"""The reference collector through the real stack (tiny policy, Gym servers), each relevant fault armed."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from pytest_rollout_chaos.collector.protocol import InfrastructureError, ShortCountError, TooManyAbortedError
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.faults.freeze import Freeze
from pytest_rollout_chaos.faults.hang import Hang
from pytest_rollout_chaos.faults.kill import Kill
from pytest_rollout_chaos.faults.nan_logprobs import NanLogprobs
from pytest_rollout_chaos.faults.prefix_drift import PrefixDrift
from pytest_rollout_chaos.faults.short_results import ShortResults
from pytest_rollout_chaos.faults.trajectory_exception import TrajectoryException
from pytest_rollout_chaos.invariants import Observation, Status, assert_all_pass, check_all
from pytest_rollout_chaos.invariants.observe import observe
from tests.faults._applied import applied
from tests.integration.collector.conftest import Run, greedy_rows

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

AGENT = "calculator_agent"
GYM_INVARIANTS = (
    "accounted",
    "no_silent_short_count",
    "isolated_failures",
    "finite_logprobs",
    "prefix_consistent",
    "bounded",
    "root_cause_visible",
)
DEADLINE_S = 30.0


async def _collect(run: Run, n: int = 4) -> Observation:
    rows = greedy_rows(run, n)
    return await observe(
        ReferenceCollector(run.ctx), rows, mode="train", history=run.ctx.history, deadline_s=DEADLINE_S
    )


async def test_clean_run_is_multi_turn_and_passes_every_gym_invariant(run: Run) -> None:
    observation = await _collect(run)
    assert observation.raised is None, observation.raised
    assert observation.rollouts is not None
    assert [r.status for r in observation.rollouts if r] == ["completed"] * 4
    assert all(len(r.turns) >= 2 for r in observation.rollouts if r)
    assert_all_pass(check_all(observation, GYM_INVARIANTS), allow_not_judged=True)


async def test_one_trajectory_exception_aborts_that_row_only(run: Run) -> None:
    async with applied(TrajectoryException(target=AGENT, row=1, message="boom in row 1"), run.faults):
        observation = await _collect(run)
    assert observation.rollouts is not None, observation.raised
    statuses = {r.row_index: r.status for r in observation.rollouts if r}
    assert statuses == {0: "completed", 1: "aborted", 2: "completed", 3: "completed"}
    aborted = observation.rollouts[1]
    assert aborted is not None
    assert "HTTP 500" in (aborted.error or "")
    assert "boom in row 1" in (aborted.error or "")
    assert_all_pass(check_all(observation, GYM_INVARIANTS), allow_not_judged=True)


async def test_nan_logprobs_once_are_retried_for_that_row(run: Run) -> None:
    async with applied(NanLogprobs(target=AGENT, row=2, count=1), run.faults):
        observation = await _collect(run)
    assert observation.rollouts is not None, observation.raised
    by_row = {r.row_index: r for r in observation.rollouts if r}
    assert by_row[2].status == "completed"
    assert by_row[2].attempts == 2
    assert {by_row[i].attempts for i in (0, 1, 3)} == {1}
    assert_all_pass(check_all(observation, GYM_INVARIANTS), allow_not_judged=True)


@pytest.mark.parametrize("shape", ["nan", "null", "inf"])
async def test_persistent_bad_logprobs_abort_the_row_with_that_reason(run: Run, shape: str) -> None:
    async with applied(NanLogprobs(target=AGENT, row=0, shape=shape), run.faults):  # type: ignore[arg-type]
        observation = await _collect(run)
    assert observation.rollouts is not None, observation.raised
    first = observation.rollouts[0]
    assert first is not None
    assert first.status == "aborted"
    assert first.attempts == run.ctx.settings.max_logprob_attempts
    assert "non-finite logprob" in (first.error or "")
    assert_all_pass(check_all(observation, GYM_INVARIANTS), allow_not_judged=True)


async def test_prefix_drift_is_repaired_or_aborted_never_passed_through(run: Run) -> None:
    async with applied(PrefixDrift(target=AGENT, row=0), run.faults):
        observation = await _collect(run)
    assert observation.rollouts is not None, observation.raised
    first = observation.rollouts[0]
    assert first is not None
    assert first.status == "completed", first.error
    [repair] = run.ctx.history.events(source="collector", op="prefix_repair")
    assert repair.data["row"] == 0
    assert "prefix mismatch at turn 1" in repair.data["drift"]
    assert_all_pass(check_all(observation, GYM_INVARIANTS), allow_not_judged=True)


async def test_short_results_raise_at_once(run: Run) -> None:
    started = time.monotonic()
    async with applied(ShortResults(target="gym_client", count=1), run.faults):
        observation = await _collect(run)
    assert isinstance(observation.raised, ShortCountError)
    assert "requested 1 result" in str(observation.raised)
    assert "returned 0" in str(observation.raised)
    assert time.monotonic() - started < 5.0
    assert_all_pass(check_all(observation, GYM_INVARIANTS), allow_not_judged=True)


async def test_a_killed_agent_fails_the_collection_within_the_request_deadline(run: Run) -> None:
    """The Gym client retries a dead agent forever, as NeMo Gym's does; the collector's deadline ends
    it, and the agent, asked, refuses: an outage, named with its rows."""
    settings = replace(run.ctx.settings, request_timeout_s=2.0)
    quick = replace(run, ctx=replace(run.ctx, settings=settings))
    async with applied(Kill(target=AGENT), run.faults):
        observation = await _collect(quick)
    assert isinstance(observation.raised, InfrastructureError), observation.raised
    assert f"agent '{AGENT}' is gone" in str(observation.raised)
    assert "within request_timeout_s=2.0" in str(observation.raised)
    assert "rows [0, 1, 2, 3]" in str(observation.raised)
    assert observation.elapsed_s < 10.0
    retried = run.ctx.history.events(source="collector", op="run_retry")
    assert retried, "the Gym client gave up on the dead agent instead of retrying"
    verdicts = check_all(observation, GYM_INVARIANTS)  # a killed agent fails no row on a server
    assert all(v.status in (Status.PASS, Status.NOT_JUDGED) for v in verdicts), [v.render() for v in verdicts]


async def test_a_hung_trajectory_meets_its_request_deadline(run: Run) -> None:
    settings = replace(run.ctx.settings, request_timeout_s=2.0)
    quick = replace(run, ctx=replace(run.ctx, settings=settings))
    async with applied(Hang(target=AGENT, row=0), run.faults):
        observation = await _collect(quick)
    assert observation.rollouts is not None, observation.raised
    first = observation.rollouts[0]
    assert first is not None
    assert first.status == "aborted"
    assert "within request_timeout_s=2.0" in (first.error or "")
    assert [r.status for r in observation.rollouts[1:] if r] == ["completed"] * 3
    assert observation.elapsed_s < 10.0
    assert_all_pass(check_all(observation, GYM_INVARIANTS), allow_not_judged=True)


async def test_a_frozen_agent_fails_the_collection_within_the_request_deadline(run: Run) -> None:
    settings = replace(run.ctx.settings, request_timeout_s=2.0)
    quick = replace(run, ctx=replace(run.ctx, settings=settings))
    async with applied(Freeze(target=AGENT), run.faults):
        observation = await _collect(quick)
    assert isinstance(observation.raised, TooManyAbortedError), observation.raised
    assert "4 of 4 rollouts aborted" in str(observation.raised)
    assert "within request_timeout_s=2.0" in str(observation.raised)
    assert observation.elapsed_s < 10.0
    assert_all_pass(check_all(observation, GYM_INVARIANTS), allow_not_judged=True)
