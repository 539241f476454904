"""A trial over the real stack: the collector, every server, the fault layer and the faults all
write to the one History the invariants read (``trial.open_trial``)."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.faults.kill import Kill
from pytest_rollout_chaos.history import Event
from tests.faults._applied import applied
from tests.faults._hooked import wait_for
from tests.integration.collector.conftest import Run, greedy_rows

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

AGENT = "calculator_agent"


async def test_every_writer_lands_in_the_trial_s_one_history(run: Run) -> None:
    assert run.faults.history is run.ctx.history
    rollouts = await ReferenceCollector(run.ctx).collect(greedy_rows(run, 1), mode="train")
    assert [rollout.status for rollout in rollouts] != ["aborted"], rollouts
    sources = {event.source for event in run.ctx.history.events()}
    # the collector, the Gym servers and the fault layer's records, and the policy's own events file
    assert {"collector", "agent", "resources", "policy"} <= sources, sources


async def test_a_fault_s_kill_and_the_process_exit_are_in_the_same_history(run: Run) -> None:
    async with applied(Kill(target=AGENT), run.faults):
        pass

    def killed(event: Event) -> bool:
        return event.source == "process" and event.op == "exit" and event.data.get("server") == AGENT

    exits = wait_for(run.ctx.history, killed)
    assert exits[0].data["signal"] == 9, exits[0].data
    assert run.ctx.history.events(source="fault", op="inject"), "the fault's inject is recorded beside it"
