"""actor_kill and node_down where the server is a plain local process: refused, saying what they need.

Their effect on Ray actors and nodes is tested on a real cluster in ``tests/ray``.
"""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults._ray_fault import not_hosted_reason, not_removable_reason
from pytest_rollout_chaos.faults.actor_kill import ActorKill
from pytest_rollout_chaos.faults.apply import inject_recorded
from pytest_rollout_chaos.faults.node_down import NodeDown
from tests.faults._hooked import Hooked

NEEDS_RAY = "the server does not run in a Ray actor in this run (pass --rollout-chaos-ray=local:N)"


def test_the_scenario_format_knows_them() -> None:
    assert registry.build("actor_kill", {"target": "calculator_agent", "restart": True}) == ActorKill(
        target="calculator_agent", restart=True
    )
    assert registry.build("node_down", {"target": "echo_agent"}) == NodeDown(target="echo_agent")
    schema = registry.json_schema("actor_kill")
    assert schema["properties"]["restart"]["type"] == "boolean"
    assert schema["properties"]["restart"]["default"] is False
    with pytest.raises(registry.FaultParameterError, match=r"restart: expected a boolean, got 'yes'"):
        registry.build("actor_kill", {"target": "x", "restart": "yes"})
    with pytest.raises(registry.FaultParameterError, match=r"unknown parameter for fault 'node_down'"):
        registry.build("node_down", {"target": "x", "node": 1})


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", [ActorKill(target="hooked"), NodeDown(target="hooked")])
async def test_a_local_process_is_refused_and_left_running(
    hooked: Hooked, fault: ActorKill | NodeDown
) -> None:
    ctx, history = hooked.context()
    assert not_hosted_reason(hooked.process) == NEEDS_RAY
    assert not_removable_reason(hooked.process, node=True) == NEEDS_RAY
    assert not_hosted_reason(None) == NEEDS_RAY  # a server this run did not start (external policy)
    with pytest.raises(FaultError, match=r"target 'hooked': the server does not run in a Ray actor"):
        fault.preflight(ctx)
    with pytest.raises(FaultError, match=r"target 'hooked': the server does not run in a Ray actor"):
        await inject_recorded(fault, ctx)
    assert hooked.process.is_running()
    assert not history.events(source="process", op="exit")
