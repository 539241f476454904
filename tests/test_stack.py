"""ChaosStack's policy replicas: their names, what ``policy``, ``policy[i]`` and ``model->policy`` stand
for, a scenario's narrower view, and the engine's choice of replicas per scenario (pure: nothing is
started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.collector.abilities import declared
from pytest_rollout_chaos.engine.fit import Fit, fitted, not_applicable
from pytest_rollout_chaos.engine.fit_facts import stack_facts
from pytest_rollout_chaos.scenario.model import Scenario, parse_scenario
from pytest_rollout_chaos.servers.gym.stack import MODEL_NAME
from pytest_rollout_chaos.servers.links import link_server
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.stack import ChaosStack
from tests._unstarted_stack import unstarted_stack


def _stack(replicas: int, tmp_path: Path, *, real: frozenset[str] = frozenset()) -> ChaosStack:
    return unstarted_stack(tmp_path, replicas=replicas, real=real)


def test_one_replica_keeps_the_plain_name_and_index_0_means_it(tmp_path: Path) -> None:
    stack = _stack(1, tmp_path)
    assert stack.policy_names() == ("policy",)
    assert stack.expand_target("policy") == ("policy",)
    assert stack.expand_target("policy[0]") == ("policy",)
    assert stack.expand_target("model->policy[0]") == ("model->policy",)
    assert "policy" in stack.servers()


def test_policy_stands_for_every_replica_and_an_index_for_one(tmp_path: Path) -> None:
    stack = _stack(3, tmp_path)
    assert stack.expand_target("policy") == ("policy[0]", "policy[1]", "policy[2]")
    every = ("model->policy[0]", "model->policy[1]", "model->policy[2]")
    assert stack.expand_target("model->policy") == every
    assert stack.expand_target("policy[1]") == ("policy[1]",)
    assert stack.expand_target("model->policy[2]") == ("model->policy[2]",)
    assert stack.expand_target("model") == ("model",)
    servers = stack.servers()
    assert {"policy[0]", "policy[1]", "policy[2]"} <= set(servers)
    assert servers["policy[1]"] is stack.replicas[1].process
    assert "policy" not in servers  # an alias for all of them, expanded before a fault acts


def test_a_scenario_may_use_fewer_replicas_than_were_started(tmp_path: Path) -> None:
    narrowed = _stack(3, tmp_path).using(2)
    assert narrowed.expand_target("policy") == ("policy[0]", "policy[1]")
    assert "policy[2]" not in narrowed.servers()
    beyond = r"'policy\[2\]': this stack runs 2 policy replica\(s\) \(valid: policy, "
    with pytest.raises(ValueError, match=beyond):
        narrowed.expand_target("policy[2]")
    with pytest.raises(ValueError, match="3 policy replicas asked of a stack that started 2"):
        _stack(2, tmp_path).using(3)


def test_a_replica_link_is_recorded_under_the_replica_with_the_policy_as_source() -> None:
    assert link_server("model->policy[1]") == ("policy[1]", "policy")
    assert link_server("collector->policy[0]") == ("policy[0]", "policy")
    assert link_server("model->policy") == ("policy", "policy")


def _scenario(replicas: int | None) -> Scenario:
    stack = f"stack: {{policy: {{replicas: {replicas}}}}}\n" if replicas else ""
    return parse_scenario(
        f"name: x\ndescription: d\n{stack}faults:\n  - {{kind: kill, target: policy}}\n"
        "expect:\n  invariants: [accounted]\n",
        Path("s.chaos.yaml"),
        policy_replicas=4,
    )


def test_the_engine_gives_a_scenario_its_own_count_or_the_runs(tmp_path: Path) -> None:
    stack = _stack(2, tmp_path)
    same = _fitted(_scenario(2), stack)
    assert (same.replicas, same.reason) == (2, None)
    fewer = _fitted(_scenario(None), stack)
    assert (fewer.replicas, fewer.reason) == (1, None)
    assert stack.using(fewer.replicas).policy_names() == ("policy[0]",)
    reason = _fitted(_scenario(3), stack).reason
    assert reason == (
        "the scenario needs 3 policy replica(s) (stack.policy.replicas); this run started 2 "
        "(--rollout-chaos-policy-replicas=3 starts them)"
    )


def test_real_nemo_gym_cannot_narrow_its_base_urls_so_the_scenario_skips(tmp_path: Path) -> None:
    stack = _stack(2, tmp_path, real=frozenset({MODEL_NAME}))
    reason = _fitted(_scenario(None), stack).reason
    assert reason is not None
    assert "real NeMo Gym's model server was given all their base URLs at start" in reason
    assert "--rollout-chaos-policy-replicas=1" in reason


def test_an_external_policy_is_one_server_so_a_scenario_asking_for_two_skips(tmp_path: Path) -> None:
    stack = _stack(1, tmp_path)
    external = PolicyServer.external("http://127.0.0.1:9/v1", model="m", model_dir=bundled.tiny_model_dir())
    stack = ChaosStack(
        policy=external,
        gym=stack.gym,
        toxiproxy=None,
        links={},
        fault_layer=None,
        collector_policy_url=external.base_url,
    )
    assert stack.servers().get("policy") is None
    reason = _fitted(_scenario(2), stack).reason
    assert reason is not None
    assert reason.startswith("the scenario needs 2 policy replica(s) (stack.policy.replicas); the policy is ")
    assert "--rollout-chaos-policy-url=http://127.0.0.1:9/v1" in reason


def test_a_fault_on_a_replica_the_stack_does_not_run_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    scenario = parse_scenario(
        "name: x\ndescription: d\nfaults:\n  - {kind: kill, target: 'policy[1]'}\n"
        "expect:\n  invariants: [accounted]\n",
        Path("s.chaos.yaml"),
        policy_replicas=2,
    )
    assert not_applicable(scenario, _stack(2, tmp_path)) is None
    reason = not_applicable(scenario, _stack(1, tmp_path))
    assert reason == (
        "faults/0 kill on 'policy[1]': 'policy[1]': this stack runs 1 policy replica(s) "
        "(valid: policy, policy[0])"
    )


def _fitted(scenario: Scenario, stack: ChaosStack) -> Fit:
    """The fit step's answer for a collector that declares nothing, the run asking for one replica."""
    return fitted(scenario, stack_facts(stack), declared(object), run_replicas=1)
