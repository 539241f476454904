"""The real stack for collector integration tests: the tiny policy server and the embedded Gym servers.

Built once per module by the one stack builder and stopped on every path. Every link between
servers, and from the collector, runs through a fault layer (no Toxiproxy: these tests use
semantic and process faults only). Each test gets its trial (``open_trial``):
a fresh History following every server's events file, a Gym client and an environment client,
all closed after the test, and the fault context over the same History.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from pytest_rollout_chaos.builder import GymShape, StackBuilder
from pytest_rollout_chaos.collector.gym_client import GymClient
from pytest_rollout_chaos.collector.protocol import CollectorContext, CollectorSettings
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack
from pytest_rollout_chaos.trial import open_trial


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosStack]:
    with ProcessKeeper(tmp_path_factory.mktemp("collector-stack")) as keeper:
        yield StackBuilder(ChaosSettings(), keeper, links="layer", gym=GymShape(max_steps=4)).stack


@dataclass(frozen=True, slots=True)
class Run:
    """One test's view: the collector context and the fault context sharing one History."""

    ctx: CollectorContext
    faults: FaultContext
    client: GymClient
    stack: ChaosStack


@pytest_asyncio.fixture
async def run(stack: ChaosStack) -> AsyncIterator[Run]:
    for name, process in stack.servers().items():
        if not process.is_running():
            pytest.fail(f"server {name} is not running at test start; an earlier test broke the stack")
    stack.reset()
    settings = CollectorSettings(request_timeout_s=20.0, collect_timeout_s=60.0)
    async with open_trial(stack, settings=settings) as trial:
        assert isinstance(trial.collector.gym, GymClient)
        yield Run(trial.collector, trial.faults, trial.collector.gym, stack)


def greedy_rows(run: Run, n: int) -> list[dict[str, Any]]:
    """Calculator rows sampled greedily, so every trajectory makes a tool call (multi-turn)."""
    rows = run.stack.gym.rows("calculator", n)
    for row in rows:
        row["responses_create_params"]["temperature"] = 0.0
    return rows
