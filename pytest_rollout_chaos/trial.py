"""One trial over a ``ChaosStack``: the collector's context and the faults' context over one History.

Everything that runs a collection on a stack opens its trial here: the scenario runner, the
pytest fixtures (and through them the fault injector), the collector integration tests and the
benchmarks. So the History always follows every server's events file (the policy's and the fault
layer's included), records every process exit, and is the same History the collector, the Gym
client and the faults write to. Copies of this wiring drifted apart before; a test
(``tests/test_trial_seam.py``) keeps any other module from building either context.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pytest_rollout_chaos.collector.context import collector_context
from pytest_rollout_chaos.collector.protocol import CollectorContext, CollectorSettings
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.gym.stack import eos_token_id
from pytest_rollout_chaos.stack import ChaosStack


@dataclass(frozen=True, slots=True)
class Trial:
    """One collection's worth of wiring: ``collector`` for the collector, ``faults`` for the faults."""

    stack: ChaosStack
    history: History
    collector: CollectorContext
    faults: FaultContext


@contextlib.asynccontextmanager
async def open_trial(
    stack: ChaosStack,
    *,
    settings: CollectorSettings | None = None,
    seed: int = 0,
    history: History | None = None,
) -> AsyncIterator[Trial]:
    """Both contexts over ``history`` (a fresh one by default); their clients close when the block ends.

    ``seed`` seeds the faults' random choices. The History follows the servers' events files
    from now on, so a trial judges only its own events.
    """
    # What the contexts need of the stack, read before either is built.
    events_files, placement = stack.events_files(), stack.placement()
    processes, unmanaged = stack.servers(), stack.unmanaged()
    eos_token_ids = (eos_token_id(stack.policy.model_dir),)
    recorded = history if history is not None else History()
    if stack.pull_files is not None:  # servers elsewhere: their files here before following them
        await asyncio.to_thread(stack.pull_files)
        recorded.pull_with(stack.pull_files)
    for path in events_files:  # what the servers record from now on
        recorded.follow(path)
    async with contextlib.AsyncExitStack() as owned:
        collector = await owned.enter_async_context(
            collector_context(
                head_url=stack.gym.head_url,
                resources_url=stack.gym.resources_url,
                policy_url=stack.collector_policy_url,
                model=stack.policy.model,
                eos_token_ids=eos_token_ids,
                agent_urls=stack.gym.agents,
                model_dir=stack.policy.model_dir,
                settings=settings,
                history=recorded,
                placement=placement,
                gym_python=stack.gym_python,
            )
        )
        toxiproxy = (
            await owned.enter_async_context(stack.toxiproxy.client()) if stack.toxiproxy is not None else None
        )
        faults = FaultContext(
            history=recorded,
            processes=processes,
            toxiproxy=toxiproxy,
            links=stack.links,
            fault_layer=stack.fault_layer.url if stack.fault_layer is not None else None,
            gym_client=collector.gym,
            rng=random.Random(seed),
            unmanaged=unmanaged,
        )
        yield Trial(stack, recorded, collector, faults)
