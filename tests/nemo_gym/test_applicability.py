"""Every catalog scenario runs on a stack of real NeMo Gym servers (pure: nothing is started).

Semantic faults act from the fault layer in front of the servers and the layer records every
request, and the nemo-gym backend starts our environment server for native-style collectors,
so no scenario needs anything inside a real server: the runner skips none of them there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.engine.run import not_applicable
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.scenario.model import load_scenario
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer
from pytest_rollout_chaos.servers.gym.stack import (
    DEFAULT_AGENTS,
    HEAD_NAME,
    MODEL_NAME,
    RESOURCES_NAME,
    GymStack,
)
from pytest_rollout_chaos.servers.nemo_gym.stack import ENV_NAME, NemoGymStack
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.stack import ChaosStack

CATALOG = Path(__file__).parents[2] / "scenarios"
NAMES = (MODEL_NAME, RESOURCES_NAME, HEAD_NAME, ENV_NAME, *DEFAULT_AGENTS)
REAL = frozenset({MODEL_NAME, RESOURCES_NAME, *DEFAULT_AGENTS})  # what the nemo-gym backend reports


def _stack(
    without_hooks: frozenset[str], tmp_path: Path, *, replicas: int = 1, relayed: bool = False
) -> ChaosStack:
    """A ChaosStack of processes that are never started: ``not_applicable`` only reads names.
    ``replicas`` policy servers (run with ``--rollout-chaos-policy-replicas``, as real NeMo Gym
    needs for a scenario that asks for them); ``relayed``: each agent behind its legacy_agent
    relay, as from NeMo Gym 0.5 on."""

    def process(name: str, port: int) -> ManagedProcess:
        return ManagedProcess(ServerSpec(name, ("true",), readiness.address_known(), port=port), tmp_path)

    processes = {name: process(name, 20000 + index) for index, name in enumerate(NAMES)}
    common = {
        "head_url": "http://127.0.0.1:1",
        "agents": {agent: "http://127.0.0.1:2" for agent in DEFAULT_AGENTS},
        "model_url": "http://127.0.0.1:3",
        "resources_url": "http://127.0.0.1:4",
        "processes": processes,
        "events_files": [],
        "real_servers": without_hooks,
    }
    relays = {agent: f"{agent}_environment_server" for agent in DEFAULT_AGENTS}
    gym = (
        NemoGymStack(**common, nemo_gym_version="0.7.0", relays=relays)  # type: ignore[arg-type]
        if relayed
        else GymStack(**common)  # type: ignore[arg-type]
    )
    policies = tuple(
        PolicyServer.of(
            process(f"policy[{index}]", 19990 + index),
            model="m",
            model_dir=bundled.tiny_model_dir(),
            backend="tiny",
        )
        for index in range(replicas)
    )
    return ChaosStack(
        policy=policies[0],
        replicas=policies,
        gym=gym,
        toxiproxy=None,
        links={},
        fault_layer=FaultLayer("http://127.0.0.1:5", tmp_path / "fault_layer.events.jsonl"),
        collector_policy_url="http://127.0.0.1:19999/v1",
    )


@pytest.mark.parametrize("path", sorted(CATALOG.glob("*.chaos.yaml")), ids=lambda path: path.name)
def test_every_catalog_scenario_runs_on_real_servers(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    needs_ray = any(registry.fault_class(step.kind).family == "ray" for step in scenario.faults)
    replicas = scenario.stack.policy.replicas or 1
    for stack in (
        _stack(REAL, tmp_path, replicas=replicas),
        _stack(frozenset(), tmp_path, replicas=replicas),
    ):
        reason = not_applicable(scenario, stack)
        if needs_ray:  # these servers are not in Ray actors
            assert reason is not None
            assert "does not run in a Ray actor" in reason
        else:
            assert reason is None


def test_native_style_and_environment_latency_run_on_real_servers(tmp_path: Path) -> None:
    scenario = tmp_path / "x.chaos.yaml"
    scenario.write_text(
        "name: x\ndescription: d\nstack: {env_latency_ms_per_call: 5, env_latency_ms_per_item: 1}\n"
        "workload: {tasks: [calculator], style: native}\n"
        "expect: {invariants: [accounted, batched_env_eval], within_s: 5,\n"
        "  witness: {task_groups_stepped: 1}}\n"
    )
    assert not_applicable(load_scenario(scenario), _stack(REAL, tmp_path)) is None


def test_an_on_request_trigger_on_a_real_server_runs(tmp_path: Path) -> None:
    scenario = tmp_path / "x.chaos.yaml"
    scenario.write_text(
        "name: x\ndescription: d\nworkload: {tasks: [calculator]}\n"
        "faults:\n  - {kind: kill, target: calculator_agent, at: {on_request: {server: model, nth: 2}}}\n"
        "expect: {invariants: [accounted], within_s: 5}\n"
    )
    assert not_applicable(load_scenario(scenario), _stack(REAL, tmp_path)) is None


def test_an_outage_scenario_skips_where_a_relay_hides_the_agents_exit(tmp_path: Path) -> None:
    outage = load_scenario(CATALOG / "agent-killed-stays-down.chaos.yaml")
    reason = not_applicable(outage, _stack(REAL, tmp_path, relayed=True))
    assert reason is not None
    assert reason.startswith(
        "faults/1 kill on 'echo_agent': outage_fails_collection judges how the collector answers "
        "echo_agent's exit, and on NeMo Gym 0.7.0 the collector reaches echo_agent only through its "
        "legacy_agent relay 'echo_agent_environment_server', which retries a dead agent without limit"
    )
    # NeMo Gym 0.4 (the collector posts to the agent itself) runs it; so does every scenario that
    # does not judge the collector's answer to an exit, relay or not
    assert not_applicable(outage, _stack(REAL, tmp_path)) is None
    oom = load_scenario(CATALOG / "agent-oom-killed.chaos.yaml")
    assert not_applicable(oom, _stack(REAL, tmp_path, relayed=True)) is None
