"""Every catalog scenario runs on a stack of real NeMo Gym servers (pure: nothing is started).

Semantic faults act from the fault layer in front of the servers and the layer records every
request, and the nemo-gym backend starts our environment server for native-style collectors,
so no scenario needs anything inside a real server. The runner skips only what a real server
decides itself (a gym scenario whose attempts must be scored differently: real NeMo Gym's
verifier scores them alike) or hides (an agent's exit behind the relays of NeMo Gym 0.5 on).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos.engine.fit import not_applicable
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.scenario.model import load_scenario
from pytest_rollout_chaos.servers.gym.stack import DEFAULT_AGENTS, MODEL_NAME, RESOURCES_NAME
from pytest_rollout_chaos.servers.nemo_gym.stack import ENV_NAME
from pytest_rollout_chaos.stack import ChaosStack
from tests._unstarted_stack import unstarted_stack

CATALOG = Path(__file__).parents[2] / "scenarios"
REAL = frozenset({MODEL_NAME, RESOURCES_NAME, *DEFAULT_AGENTS})  # what the nemo-gym backend reports


def _stack(
    without_hooks: frozenset[str],
    tmp_path: Path,
    *,
    replicas: int = 1,
    relayed: bool = False,
    pins_tool_calls: bool = False,
) -> ChaosStack:
    """The stack the nemo-gym backend runs (its environment server too), nothing started;
    ``replicas`` policy servers (run with ``--rollout-chaos-policy-replicas``, as real NeMo Gym
    needs for a scenario that asks for them); ``relayed``: each agent behind its legacy_agent
    relay, as from NeMo Gym 0.5 on; ``pins_tool_calls``: the policy is real vLLM with strict tool
    calling."""
    return unstarted_stack(
        tmp_path,
        replicas=replicas,
        real=without_hooks,
        extra_gym_names=(ENV_NAME,),
        with_fault_layer=True,
        relayed=relayed,
        pins_tool_calls=pins_tool_calls,
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
        rescored = (
            scenario.stack.rescore_bonus or scenario.stack.reward_spread
        ) and scenario.workload.style == "gym"
        if needs_ray:  # these servers are not in Ray actors
            assert reason is not None
            assert "does not run in a Ray actor" in reason
        elif rescored and stack.gym.real_servers:  # real NeMo Gym's verifier scores by the answer alone
            assert reason is not None
            assert "needs our resources server to answer /verify" in reason
        elif scenario.stack.policy.stop and stack.gym.real_servers:  # vllm_model's extra_body: at start
            assert reason is not None
            assert "real NeMo Gym's vllm_model reads its extra_body from its config at start" in reason
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


def test_waiting_for_the_models_drift_skips_where_vllm_forces_tool_calls(tmp_path: Path) -> None:
    waiting = load_scenario(CATALOG / "retokenization-drift.chaos.yaml")
    reason = not_applicable(waiting, _stack(REAL, tmp_path, relayed=True, pins_tool_calls=True))
    assert reason is not None
    assert reason.startswith(
        "expect.witness prompt_ids_drifted waits for the model's own tool-call JSON to drift, and real "
        "vLLM's strict tool calling forces each Hermes tool call's envelope"
    )
    assert "VLLM_ENFORCE_STRICT_TOOL_CALLING=0" in reason
    # a policy that lets the model write its own tool calls runs it; so does the embedded model
    # server (it generates through /v1/completions, where no tool parser acts), and a drift fault
    assert not_applicable(waiting, _stack(REAL, tmp_path, relayed=True)) is None
    assert not_applicable(waiting, unstarted_stack(tmp_path, pins_tool_calls=True)) is None
    injected = load_scenario(CATALOG / "policy-tokenize-drift.chaos.yaml")
    assert not_applicable(injected, _stack(REAL, tmp_path, relayed=True, pins_tool_calls=True)) is None
