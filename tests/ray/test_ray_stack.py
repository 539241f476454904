"""With ``--rollout-chaos-ray=local:N`` (N >= 2) the servers live in Ray actors on their nodes, and
Ray's faults act on those actors and nodes. CI runs this module in its Ray stage; elsewhere it skips.

The faults are tested here on their own, with no collection running, so each inject says
``expect_hits=0``: a fault from ``chaos_faults`` that touched nothing otherwise fails the test."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.injector import FaultInjector
from pytest_rollout_chaos.servers.procfs import group_pids, listening
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack

ray = pytest.importorskip("ray")
from pytest_rollout_chaos.ray.hosted import RayHostedProcess  # noqa: E402 - after the skip

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]


@pytest.fixture
def on_ray(chaos_settings: ChaosSettings, chaos_stack_reset: ChaosStack) -> ChaosStack:
    if not (chaos_settings.ray.kind == "local" and chaos_settings.ray.nodes >= 2):
        pytest.skip("needs --rollout-chaos-ray=local:2 or more (CI's Ray stage runs it so)")
    return chaos_stack_reset


def hosted(stack: ChaosStack, name: str) -> RayHostedProcess:
    process = stack.servers()[name]
    assert isinstance(process, RayHostedProcess), f"{name} is not in a Ray actor: {process!r}"
    return process


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


def answers(process: RayHostedProcess) -> bool:
    with urllib.request.urlopen(process.url + "/health", timeout=5) as response:
        return bool(response.status == 200)


def port_of(process: RayHostedProcess) -> int:
    address = process.address()
    assert address is not None, f"{process.name} has no address"
    return address[1]


def alive_nodes() -> dict[str, bool]:
    return {str(node["NodeID"]): bool(node["Alive"]) for node in ray.nodes()}


async def test_each_server_runs_in_an_actor_on_its_planned_node(on_ray: ChaosStack) -> None:
    placed = {
        name: hosted(on_ray, name) for name in ("policy", "resources", "model", "head", *on_ray.agent_names)
    }
    for name, process in placed.items():
        assert parent_of(process.pid) == process.worker_pid, f"{name}'s server is not its actor's child"
        assert answers(process), name
    assert {placed[name].slot.index for name in ("policy", "resources", "model", "head")} == {0}
    assert all(placed[agent].slot.index >= 1 for agent in on_ray.agent_names)
    nodes = {process.node() for process in placed.values()}
    assert len(nodes) >= 2, nodes
    assert on_ray.placement()["calculator_agent"] == placed["calculator_agent"].node()


async def test_each_server_listens_on_its_nodes_loopback_address_and_nowhere_else(on_ray: ChaosStack) -> None:
    placed = {name: hosted(on_ray, name) for name in ("policy", "model", *on_ray.agent_names)}
    nodes: dict[int, str] = {}
    for name, process in placed.items():
        address = process.slot.address
        assert address == f"127.0.0.{process.slot.index + 2}", f"{name} on {address}"
        nodes[process.slot.index] = address
        found = {where for pid in group_pids(process.pid) for where in listening(pid)}
        assert found == {(address, port_of(process))}, f"{name} listens on {found}, not only {address}"
    assert len(set(nodes.values())) == len(nodes) >= 2, nodes


async def test_actor_kill_takes_the_server_and_heal_starts_a_new_actor(
    on_ray: ChaosStack, chaos_faults: FaultInjector, chaos_history: History
) -> None:
    agent = hosted(on_ray, "calculator_agent")
    pid, worker, actor, address = agent.pid, agent.worker_pid, agent.actor, agent.address()
    [facts] = await chaos_faults.inject("actor_kill", "calculator_agent", expect_hits=0)
    assert facts["code"] == 137
    assert facts["worker_pid"] == worker
    assert "node 1" in str(facts["where"])
    assert not agent.is_running()
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(actor.describe.remote(), timeout=30)
    exits = chaos_history.events(source="process", op="exit")
    assert any(event.data["server"] == "calculator_agent" and event.data["code"] == 137 for event in exits)
    await chaos_faults.heal_all()
    assert agent.is_running()
    assert agent.pid != pid
    assert agent.worker_pid != worker
    assert agent.address() == address
    assert answers(agent)


async def test_actor_kill_with_restart_is_back_before_inject_returns(
    on_ray: ChaosStack, chaos_faults: FaultInjector
) -> None:
    agent = hosted(on_ray, "echo_agent")
    pid, address = agent.pid, agent.address()
    [facts] = await chaos_faults.inject("actor_kill", "echo_agent", restart=True, expect_hits=0)
    assert facts["code"] == 137
    assert facts["pid_after"] == agent.pid != pid
    assert agent.is_running()
    assert agent.address() == address
    assert answers(agent)


async def test_node_down_loses_every_server_of_the_node_and_heal_replaces_the_node(
    on_ray: ChaosStack, chaos_faults: FaultInjector
) -> None:
    agent = hosted(on_ray, "calculator_agent")
    on_node = sorted(name for name in on_ray.agent_names if hosted(on_ray, name).slot == agent.slot)
    elsewhere = {name: hosted(on_ray, name).pid for name in ("policy", "resources", *on_ray.agent_names)}
    elsewhere = {name: pid for name, pid in elsewhere.items() if name not in on_node}
    node_id = agent.cluster.node_id(agent.slot)
    [facts] = await chaos_faults.inject("node_down", "calculator_agent", expect_hits=0)
    assert facts["servers"] == on_node
    assert facts["node_id"] == node_id
    assert int(str(facts["workers"])) >= 1
    assert 0 < float(str(facts["declared_dead_s"])) < 30
    assert alive_nodes()[node_id] is False
    assert not any(hosted(on_ray, name).is_running() for name in on_node)
    assert {name: hosted(on_ray, name).pid for name in elsewhere} == elsewhere  # nothing else touched
    await chaos_faults.heal_all()
    replacement = agent.cluster.node_id(agent.slot)
    assert replacement
    assert replacement != node_id
    assert alive_nodes()[replacement]
    for name in on_node:
        assert hosted(on_ray, name).is_running(), name
        assert answers(hosted(on_ray, name)), name
        back = hosted(on_ray, name)
        assert {w for pid in group_pids(back.pid) for w in listening(pid)} == {back.address()}, name
    assert agent.address() == (agent.slot.address, port_of(agent))  # its node's address again
    assert agent.node() == f"node {agent.slot.index} (ray node {replacement[:8]})"


async def test_node_down_refuses_the_head_node(on_ray: ChaosStack, chaos_faults: FaultInjector) -> None:
    with pytest.raises(FaultError, match="node 0 is the head node"):
        await chaos_faults.inject("node_down", "resources")
    assert hosted(on_ray, "resources").is_running()


async def test_oom_kills_the_actor_as_rays_memory_monitor_does(
    on_ray: ChaosStack, chaos_faults: FaultInjector
) -> None:
    agent = hosted(on_ray, "echo_agent")
    worker = agent.worker_pid
    [facts] = await chaos_faults.inject("oom", "echo_agent", expect_hits=0)
    assert facts["oom"] == "ray_memory_monitor"
    assert facts["worker_pid"] == worker
    assert facts["code"] == 137
    assert not Path(f"/proc/{worker}").exists()
    await chaos_faults.heal_all()
    assert agent.is_running()
    assert answers(agent)


async def test_a_stopped_server_restarts_once_in_a_new_actor(on_ray: ChaosStack) -> None:
    """As ``stack.policy.ready_delay_s`` does: stop (the actor goes for good), then restart with a
    delay. Exactly one server comes back, in a new actor, on the same address; a restart sent to
    the dying actor once started a second one there, which kept the port from the tracked one."""
    policy = hosted(on_ray, "policy")
    address, worker = policy.address(), policy.worker_pid
    starts = policy.log_path.read_text().count(" start: ")
    policy.stop()
    policy.restart(ready_delay_s=1.0)
    assert policy.is_running()
    assert policy.worker_pid != worker
    assert policy.address() == address
    assert policy.log_path.read_text().count(" start: ") == starts + 1
    assert {w for pid in group_pids(policy.pid) for w in listening(pid)} == {address}
    assert answers(policy)
