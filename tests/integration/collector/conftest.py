"""The real stack for collector integration tests: the tiny policy server and the embedded Gym servers.

Started once per module with ``ManagedProcess`` (own process groups, readiness probes) and
stopped on every path. Every link between servers runs through a fault layer (no Toxiproxy:
these tests use semantic and process faults only). Each test gets its trial (``open_trial``):
a fresh History following every server's events file, a Gym client and an environment client,
all closed after the test, and the fault context over the same History.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.collector.gym_client import GymClient
from pytest_rollout_chaos.collector.protocol import CollectorContext, CollectorSettings
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer, fault_layer_spec
from pytest_rollout_chaos.servers.gym import stack as gym_stack
from pytest_rollout_chaos.servers.links import LayerLinks
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.stack import ChaosStack
from pytest_rollout_chaos.trial import open_trial

MODEL_NAME = "tiny-llama"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosStack]:
    log_dir = tmp_path_factory.mktemp("collector-stack")
    started: list[ManagedProcess] = []

    def start(spec: ServerSpec) -> ManagedProcess:
        process = ManagedProcess(spec, log_dir)
        started.append(process)
        process.start()
        return process

    try:
        model_dir = bundled.tiny_model_dir()
        process = start(
            ServerSpec(
                name="policy",
                argv=(
                    sys.executable,
                    "-m",
                    "pytest_rollout_chaos.servers.policy",
                    "--model",
                    str(model_dir),
                    "--served-model-name",
                    MODEL_NAME,
                ),
                probe=readiness.all_of(readiness.address_known(), readiness.http_ok("/health")),
                env={EVENTS_FILE_ENV: str(gym_stack.events_file(log_dir, "policy"))},
                ready_timeout_s=60.0,
            )
        )
        policy = PolicyServer.of(process, model=MODEL_NAME, model_dir=model_dir, backend="tiny")
        layer_events = log_dir / "fault_layer.events.jsonl"
        fault_layer = FaultLayer(start(fault_layer_spec(layer_events)).url, layer_events)
        gym = gym_stack.start_gym_stack(
            start,
            log_dir,
            policy_url=policy.url,
            model=MODEL_NAME,
            eos_token_id=gym_stack.eos_token_id(model_dir),
            max_steps=4,
            link=LayerLinks(fault_layer.url),
        )
        # The collector reaches the policy directly: these tests fault the Gym links only.
        yield ChaosStack(
            policy=policy,
            gym=gym,
            toxiproxy=None,
            links={},
            fault_layer=fault_layer,
            collector_policy_url=policy.base_url,
        )
    finally:
        for process in reversed(started):
            process.stop()


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
