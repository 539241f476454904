"""The real stack for collector integration tests: the tiny policy server and the embedded Gym servers.

Started once per module with ``ManagedProcess`` (own process groups, readiness probes) and
stopped on every path. Every link between servers runs through a fault layer (no Toxiproxy:
these tests use semantic and process faults only). Each test gets a fresh History following
every server's events file, a Gym client and an environment client, all closed after the test.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.collector.context import collector_context
from pytest_rollout_chaos.collector.gym_client import GymClient
from pytest_rollout_chaos.collector.protocol import CollectorContext, CollectorSettings
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer, fault_layer_spec
from pytest_rollout_chaos.servers.gym import stack as gym_stack
from pytest_rollout_chaos.servers.links import LayerLinks
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec

MODEL_NAME = "tiny-llama"


@dataclass(frozen=True, slots=True)
class Stack:
    policy: ManagedProcess
    gym: gym_stack.GymStack
    eos_token_id: int
    log_dir: Path
    fault_layer: FaultLayer

    @property
    def processes(self) -> dict[str, ManagedProcess]:
        return {"policy": self.policy, **self.gym.processes}

    @property
    def events_files(self) -> list[Path]:
        return [
            gym_stack.events_file(self.log_dir, "policy"),
            *self.gym.events_files,
            self.fault_layer.events_file,
        ]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    log_dir = tmp_path_factory.mktemp("collector-stack")
    started: list[ManagedProcess] = []

    def start(spec: ServerSpec) -> ManagedProcess:
        process = ManagedProcess(spec, log_dir)
        started.append(process)
        process.start()
        return process

    try:
        model_dir = bundled.tiny_model_dir()
        policy = start(
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
        layer_events = log_dir / "fault_layer.events.jsonl"
        fault_layer = FaultLayer(start(fault_layer_spec(layer_events)).url, layer_events)
        eos = gym_stack.eos_token_id(model_dir)
        gym = gym_stack.start_gym_stack(
            start,
            log_dir,
            policy_url=policy.url,
            model=MODEL_NAME,
            eos_token_id=eos,
            max_steps=4,
            link=LayerLinks(fault_layer.url),
        )
        yield Stack(policy, gym, eos, log_dir, fault_layer)
    finally:
        for process in reversed(started):
            process.stop()


@dataclass(frozen=True, slots=True)
class Run:
    """One test's view: the collector context and the fault context sharing one History."""

    ctx: CollectorContext
    faults: FaultContext
    client: GymClient
    stack: Stack


@pytest_asyncio.fixture
async def run(stack: Stack) -> AsyncIterator[Run]:
    for name, process in stack.processes.items():
        if not process.is_running():
            pytest.fail(f"server {name} is not running at test start; an earlier test broke the stack")
    stack.gym.reset_state()
    settings = CollectorSettings(request_timeout_s=20.0, collect_timeout_s=60.0)
    async with collector_context(
        head_url=stack.gym.head_url,
        resources_url=stack.gym.resources_url,
        policy_url=stack.policy.url,
        model=MODEL_NAME,
        eos_token_ids=(stack.eos_token_id,),
        events_files=stack.events_files,
        agent_urls=stack.gym.agents,
        model_dir=bundled.tiny_model_dir(),
        settings=settings,
    ) as ctx:
        yield _run(stack, ctx)


def _run(stack: Stack, ctx: CollectorContext) -> Run:
    async def restart(name: str) -> None:
        # In this (the main) thread: a server started from a worker thread would get its
        # parent-death signal when that thread ends (PR_SET_PDEATHSIG is per thread).
        stack.processes[name].restart()

    faults = FaultContext(
        history=ctx.history,
        processes=stack.processes,
        fault_layer=stack.fault_layer.url,
        gym_client=ctx.gym,
        restart=restart,
    )
    assert isinstance(ctx.gym, GymClient)
    return Run(ctx, faults, ctx.gym, stack)


def greedy_rows(run: Run, n: int) -> list[dict[str, Any]]:
    """Calculator rows sampled greedily, so every trajectory makes a tool call (multi-turn)."""
    rows = run.stack.gym.rows("calculator", n)
    for row in rows:
        row["responses_create_params"]["temperature"] = 0.0
    return rows
