"""Where ``HostedStart`` puts each server: everything but the agents on the head node, every policy
replica included (pure: no cluster)."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.ray.hosted import on_head_node

HEAD_NODE = ["policy", "policy[0]", "policy[1]", "gym_model", "gym_resources", "gym_head"]


@pytest.mark.parametrize("name", HEAD_NODE)
def test_the_policy_its_replicas_and_the_gym_servers_stay_on_the_head_node(name: str) -> None:
    assert on_head_node(name)


@pytest.mark.parametrize("name", ["calculator_agent", "echo_agent", "policy[x]", "xpolicy[1]"])
def test_agents_and_other_names_are_spread(name: str) -> None:
    assert not on_head_node(name)
