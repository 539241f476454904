"""The scheduler arms every ``at: start`` fault before it returns from ``start``, so a collector
started after it never sends a request the fault should have met, whatever its inject awaits."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rollout_chaos.engine.schedule import Schedule, completed_rollouts, requests_seen
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.scenario.model import FaultStep, Trigger

ARMING_S = 0.05  # what arming the fault takes, as a call to Toxiproxy or the fault layer does


class SlowToArm:
    """A Gym client whose ``short_results`` takes a while to take effect, as a remote call does."""

    def __init__(self) -> None:
        self.short_by = 0

    async def short_results(self, count: int) -> None:
        await asyncio.sleep(ARMING_S)
        self.short_by = count


def schedule_of(client: SlowToArm, *steps: FaultStep) -> Schedule:
    context = FaultContext(history=History(), gym_client=client)
    return Schedule([(step, ("gym_client",)) for step in steps], context)


@pytest.mark.asyncio
async def test_a_start_fault_is_armed_when_start_returns() -> None:
    client = SlowToArm()
    schedule = schedule_of(client, FaultStep("short_results", "gym_client", params={"count": 2}))
    try:
        await schedule.start()
        # what the collector, called next, would find: the fault already there
        assert client.short_by == 2
        assert [event.op for event in schedule.ctx.history.events(source="fault")] == ["inject"]
    finally:
        await schedule.stop()
    assert client.short_by == 0  # healed


@pytest.mark.asyncio
async def test_start_waits_only_for_start_faults() -> None:
    client = SlowToArm()
    later = FaultStep("short_results", "gym_client", at=Trigger("after_s", after_s=30.0), params={"count": 1})
    schedule = schedule_of(client, later)
    try:
        await asyncio.wait_for(schedule.start(), timeout=5.0)
        assert client.short_by == 0
        assert schedule.unfired == [later]
    finally:
        await schedule.stop()


@pytest.mark.asyncio
async def test_a_start_fault_that_fails_to_inject_does_not_hold_the_start() -> None:
    step = FaultStep("short_results", "gym_client")
    schedule = Schedule([(step, ("gym_client",))], FaultContext(History()))
    try:
        await asyncio.wait_for(schedule.start(), timeout=5.0)
        assert [str(error) for error in schedule.errors] == [
            "injecting short_results(count=1) on gym_client failed: short_results on 'gym_client': "
            "this run's Gym client (NoneType) has no short_results(count)"
        ]
    finally:
        await schedule.stop()


def layer_run(history: History, request_id: str, row: int, *, status: int) -> None:
    """What the fault layer records of one ``/run`` on the collector's link to an agent."""
    link = {"link": "collector->agent:calculator_agent", "server": "calculator_agent", "row": row}
    history.append("agent", "invoke", "POST /run", link, request_id=request_id)
    history.append("agent", "ok", "POST /run", {**link, "status": status}, request_id=request_id)


def test_completed_rollouts_are_the_runs_answered_on_the_collectors_links_without_our_client() -> None:
    """NeMo Gym's own client records nothing here: what the servers answered counts instead."""
    history = History()
    layer_run(history, "a-1", 0, status=200)
    layer_run(history, "a-2", 1, status=200)
    layer_run(history, "a-3", 2, status=500)  # failed: not completed
    history.append("agent", "invoke", "POST /run", {"link": "agent->model", "row": 3}, request_id="a-4")
    assert completed_rollouts(history) == 2


def test_completed_rollouts_are_the_harness_clients_own_when_it_sends() -> None:
    history = History()
    history.append("collector", "invoke", "run", {"row": 0})
    layer_run(history, "a-1", 0, status=200)  # answered, not yet read by the client
    assert completed_rollouts(history) == 0
    history.append("collector", "ok", "run", {"row": 0})
    assert completed_rollouts(history) == 1


def test_a_trajectory_the_collector_steps_itself_completes_when_its_verify_is_answered() -> None:
    """SkyRL's loop runs each trajectory itself: no /run; its environment's /verify ends it."""
    history = History()
    link = {"link": "collector->resources", "server": "resources"}
    for request_id, row, status in (("r-1", 0, 200), ("r-2", 1, 500), ("r-3", 0, 200)):
        history.append("resources", "invoke", "POST /verify", {**link, "row": row}, request_id=request_id)
        history.append(
            "resources", "ok", "POST /verify", {**link, "row": row, "status": status}, request_id=request_id
        )
    history.append("resources", "invoke", "POST /seed_session", {**link, "row": 2}, request_id="r-4")
    history.append(
        "resources", "ok", "POST /seed_session", {**link, "row": 2, "status": 200}, request_id="r-4"
    )
    assert completed_rollouts(history) == 1  # row 0 (once); row 1's verifier failed; row 2 only began


def test_a_trigger_on_a_route_counts_the_servers_requests_on_that_route_only() -> None:
    """A retrigger's route (``abilities.Retrigger``): a trajectory's closing call to the policy is no
    model call."""
    history = History()
    link = {"link": "collector->policy", "server": "policy"}
    for number, op in enumerate(
        ["POST /inference/v1/generate", "POST /finish_session", "POST /inference/v1/generate"]
    ):
        history.append("policy", "invoke", op, link, request_id=f"p-{number}")
    assert requests_seen(history, "policy") == 3
    assert requests_seen(history, "policy", "/inference/v1/generate") == 2
    schedule = Schedule([], FaultContext(history))
    generates = Trigger("on_request", server="policy", nth=3, route="/inference/v1/generate")
    assert not schedule._triggered(generates)
    history.append("policy", "invoke", "POST /inference/v1/generate", link, request_id="p-3")
    assert schedule._triggered(generates)
    assert generates.describe() == "on request #3 to policy /inference/v1/generate"
