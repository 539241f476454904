"""A ChaosStack of processes that are never started, for the tests that only read its names
(targets, replicas, what a scenario needs of the stack)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer
from pytest_rollout_chaos.servers.gym.stack import (
    DEFAULT_AGENTS,
    HEAD_NAME,
    MODEL_NAME,
    RESOURCES_NAME,
    GymStack,
)
from pytest_rollout_chaos.servers.nemo_gym.stack import NemoGymStack
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.stack import ChaosStack

GYM_NAMES = (MODEL_NAME, RESOURCES_NAME, HEAD_NAME, *DEFAULT_AGENTS)


def unstarted_process(name: str, port: int, tmp_path: Path) -> ManagedProcess:
    return ManagedProcess(ServerSpec(name, ("true",), readiness.address_known(), port=port), tmp_path)


def unstarted_stack(
    tmp_path: Path,
    *,
    replicas: int = 1,
    real: frozenset[str] = frozenset(),
    extra_gym_names: Iterable[str] = (),
    with_fault_layer: bool = False,
    relayed: bool = False,
    pins_tool_calls: bool = False,
) -> ChaosStack:
    """``replicas`` policy servers and the Gym servers (``real``: those a real NeMo Gym runs,
    without our hooks), none started; with the fault layer in front when ``with_fault_layer``;
    ``relayed``: each agent behind its legacy_agent relay, as from NeMo Gym 0.5 on;
    ``pins_tool_calls``: the policy is real vLLM forcing each tool call's envelope."""
    names = (*GYM_NAMES, *extra_gym_names)
    common: dict[str, Any] = {
        "head_url": "http://127.0.0.1:1",
        "agents": {agent: "http://127.0.0.1:2" for agent in DEFAULT_AGENTS},
        "model_url": "http://127.0.0.1:3",
        "resources_url": "http://127.0.0.1:4",
        "processes": {name: unstarted_process(name, 20000 + at, tmp_path) for at, name in enumerate(names)},
        "events_files": [],
        "real_servers": real,
    }
    relays = {agent: f"{agent}_environment_server" for agent in DEFAULT_AGENTS}
    gym = NemoGymStack(**common, nemo_gym_version="0.7.0", relays=relays) if relayed else GymStack(**common)
    policies = tuple(
        PolicyServer.of(
            unstarted_process(f"policy[{index}]", 21000 + index, tmp_path),
            model="m",
            model_dir=bundled.tiny_model_dir(),
            backend="vllm" if pins_tool_calls else "tiny",
            pins_tool_calls=pins_tool_calls,
        )
        for index in range(replicas)
    )
    layer = FaultLayer("http://127.0.0.1:5", tmp_path / "fault_layer.events.jsonl")
    return ChaosStack(
        policy=policies[0],
        gym=gym,
        toxiproxy=None,
        links={},
        fault_layer=layer if with_fault_layer else None,
        collector_policy_url="http://127.0.0.1:21000/v1",
        replicas=policies,
    )
