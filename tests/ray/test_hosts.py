"""With ``--rollout-chaos-ray=hosts:N`` (N >= 3) each server runs on a host of its own: its address,
its ``/tmp``, its files, which reach pytest over Ray; ``partition`` cuts two hosts apart until healed
and ``host_lost`` takes a whole host away until healed. CI runs this module in its Ray stage;
elsewhere it skips.

The faults are tested here on their own, with no collection running, so each inject says
``expect_hits=0``: a fault from ``chaos_faults`` that touched nothing otherwise fails the test."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.parse
from pathlib import Path

import pytest

from pytest_rollout_chaos.injector import FaultInjector
from pytest_rollout_chaos.ray.netns import HostNet
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack

ray = pytest.importorskip("ray")
from pytest_rollout_chaos.ray.hosted import RayHostedProcess  # noqa: E402 - after the skip

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

PROBE_S = 2.0
PROBE = textwrap.dedent(
    """\
    import socket, sys
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
        print("answered")
    except TimeoutError:
        print("cut")
    except OSError as error:
        print(f"refused {error.errno}")
    """
)


@pytest.fixture
def on_hosts(chaos_settings: ChaosSettings, chaos_stack_reset: ChaosStack) -> ChaosStack:
    if not (chaos_settings.ray.kind == "hosts" and chaos_settings.ray.nodes >= 3):
        pytest.skip("needs --rollout-chaos-ray=hosts:3 or more (CI's Ray stage runs it so)")
    return chaos_stack_reset


def hosted(stack: ChaosStack, name: str) -> RayHostedProcess:
    process = stack.servers()[name]
    assert isinstance(process, RayHostedProcess), f"{name} is not in a Ray actor: {process!r}"
    return process


def net_of(stack: ChaosStack) -> HostNet:
    net = hosted(stack, stack.policy_names()[0]).cluster.net
    assert net is not None
    return net


def probe(net: HostNet, host: int | None, url: str) -> str:
    """What a connection from ``host`` (None: pytest) to ``url``'s address gets."""
    parts = urllib.parse.urlsplit(url)
    argv = [sys.executable, "-c", PROBE, str(parts.hostname), str(parts.port), str(PROBE_S)]
    if host is not None:
        argv = ["ip", "netns", "exec", net.netns(host), *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout.strip()


def host_root(net: HostNet, host: int) -> Path:
    """The host's file system as its processes see it (their mount namespace)."""
    pids = net.pids(host)
    assert pids, f"nothing runs on host {host}"
    return Path(f"/proc/{pids[-1]}/root")


async def test_each_server_runs_on_its_host_and_writes_its_files_there(on_hosts: ChaosStack) -> None:
    net = net_of(on_hosts)
    first = on_hosts.policy_names()[0]  # ``policy``, or ``policy[0]`` of several replicas
    names = (first, "model", "resources", "head", *on_hosts.agent_names)
    placed = {name: hosted(on_hosts, name) for name in names}
    for name, process in placed.items():
        assert not process.here, f"{name}: a host's server is another machine's to pytest"
        address = process.address()
        assert address is not None
        assert address[0] == net.address(process.slot.index), f"{name} listens on {address}"
        assert probe(net, None, process.url) == "answered", name
    assert {placed[name].slot.index for name in (first, "model", "resources", "head")} == {0}
    assert {placed[agent].slot.index for agent in on_hosts.agent_names} == {1, 2}
    agent = placed["calculator_agent"]
    on_host = host_root(net, agent.slot.index)
    assert (on_host / "tmp").is_dir()
    assert sorted(os.listdir(on_host / "tmp")) != sorted(os.listdir("/tmp")), "the host sees pytest's /tmp"
    assert (on_host / str(agent.log_path).lstrip("/")).is_file(), "the server's log is not on its host"
    assert f"listening on {agent.url}" in agent.log_tail(), "the log did not reach pytest"
    assert not (host_root(net, 0) / str(agent.log_path).lstrip("/")).exists(), "host 0 sees host 1's log"


async def test_partition_cuts_two_hosts_and_their_calls_through_the_proxies_until_healed(
    on_hosts: ChaosStack, chaos_faults: FaultInjector
) -> None:
    net = net_of(on_hosts)
    agent, model, echo = (hosted(on_hosts, name) for name in ("calculator_agent", "model", "echo_agent"))
    model_proxy = (await proxied(on_hosts))["agent->model"]  # the model as the agents reach it
    [facts] = await chaos_faults.inject("partition", "calculator_agent", peer="policy", expect_hits=0)
    assert facts["links"] == ["agent->model", "agent->resources"]
    assert facts["cut_off"] == ["calculator_agent"]
    assert probe(net, agent.slot.index, model.url) == "cut"  # host 1 to host 0, directly
    assert probe(net, model.slot.index, agent.url) == "cut"  # and back
    assert probe(net, agent.slot.index, model_proxy) == "cut"  # through pytest's proxy to host 0
    assert probe(net, echo.slot.index, model_proxy) == "answered"  # host 2 is on neither side
    assert probe(net, echo.slot.index, model.url) == "answered"
    assert probe(net, None, agent.url) == "answered"  # pytest reaches both sides
    await chaos_faults.heal_all()
    assert probe(net, agent.slot.index, model.url) == "answered"
    assert probe(net, agent.slot.index, model_proxy) == "answered"


async def proxied(stack: ChaosStack) -> dict[str, str]:
    """Each link's URL as its clients use it: its proxy's, beside pytest."""
    assert stack.toxiproxy is not None
    async with stack.toxiproxy.client() as client:
        proxies = await client.proxies()
    return {link: f"http://{proxies[name].listen}" for link, name in stack.links.items()}


async def test_host_lost_takes_the_whole_host_off_the_network_and_heal_boots_it_again(
    on_hosts: ChaosStack, chaos_faults: FaultInjector
) -> None:
    net = net_of(on_hosts)
    echo = hosted(on_hosts, "echo_agent")
    host = echo.slot.index
    node_id = echo.cluster.node_id(echo.slot)
    marker = host_root(net, host) / "tmp" / "before-the-loss"
    marker.write_text("x")
    [facts] = await chaos_faults.inject("host_lost", "echo_agent", expect_hits=0)
    assert facts["host"] == net.netns(host)
    assert facts["node_id"] == node_id
    assert int(str(facts["host_processes"])) >= 3  # its node's raylet, agents, workers
    assert 0 < float(str(facts["declared_dead_s"])) < 30
    assert net.pids(host) == []
    assert not echo.is_running()
    assert probe(net, None, echo.url) == "cut"  # gone: not refusing, not even unreachable
    others = {name: hosted(on_hosts, name) for name in (on_hosts.policy_names()[0], "calculator_agent")}
    assert all(process.is_running() for process in others.values())
    await chaos_faults.heal_all()
    assert echo.is_running()
    assert probe(net, None, echo.url) == "answered"
    assert echo.cluster.node_id(echo.slot) not in ("", node_id)
    assert not (host_root(net, host) / "tmp" / "before-the-loss").exists(), "a host booted again keeps /tmp"


async def test_a_node_that_cannot_reach_pytest_is_named_with_its_address(on_hosts: ChaosStack) -> None:
    """What a joined cluster's nodes on other machines are held to, tried on the hosts: a task on
    each must reach pytest's address in the cluster; host 2 is kept from the probe's port."""
    from pytest_rollout_chaos.ray.nodes import RayClusterError, check_reaches_driver
    from pytest_rollout_chaos.servers.ports import free_port

    net = net_of(on_hosts)
    mode = hosted(on_hosts, "calculator_agent").cluster.mode
    nodes = sorted(
        (node for node in ray.nodes() if node["Alive"] and node["NodeManagerAddress"] != net.driver_address),
        key=lambda node: str(node["NodeManagerAddress"]),
    )
    assert [node["NodeManagerAddress"] for node in nodes] == [net.address(k) for k in range(3)]
    check_reaches_driver(mode, nodes, net.driver_address, timeout_s=2.0)
    port = free_port(net.driver_address)
    rule = [
        "pref",
        "10",
        "to",
        f"{net.driver_address}/32",
        "ipproto",
        "tcp",
        "dport",
        str(port),
        "lookup",
        "213",
    ]
    subprocess.run(["ip", "-n", net.netns(2), "rule", "add", *rule], check=True)
    try:
        with pytest.raises(RayClusterError) as raised:
            check_reaches_driver(mode, nodes, net.driver_address, timeout_s=2.0, port=port)
    finally:
        subprocess.run(["ip", "-n", net.netns(2), "rule", "del", *rule], check=False)
    message = str(raised.value)
    assert f"node {str(nodes[2]['NodeID'])[:8]} at {net.address(2)}: timed out" in message
    assert net.address(0) not in message
    assert net.address(1) not in message
    assert f"cannot reach this one at {net.driver_address} (tried port {port}) within 2s" in message


async def test_a_cluster_of_hosts_is_joined_through_its_address_its_files_coming_over_ray(
    on_hosts: ChaosStack, tmp_path: Path
) -> None:
    """A second pytest joins this session's cluster by its GCS address: every node is on another
    machine to it (the hosts), so it checks both ways of reaching them and reads its servers' logs
    and events through Ray, as with a real cluster elsewhere; it may not remove a node it joined,
    and it leaves the cluster as it found it."""
    from tests.catalog._verdicts import CATALOG, REPO, parse_junit

    net = net_of(on_hosts)
    cluster = hosted(on_hosts, "calculator_agent").cluster
    actors_before = server_actors(net)
    junit = tmp_path / "junit.xml"
    scenarios = ("baseline", "agent-actor-restarted", "rollout-node-lost")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-rs",
            "--rollout-chaos",
            f"--rollout-chaos-ray={cluster.address}",
            f"--junitxml={junit}",
            f"--basetemp={tmp_path / 'inner'}",
            *(str(CATALOG / f"{name}.chaos.yaml") for name in scenarios),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = completed.stdout[-6000:] + completed.stderr[-2000:]
    verdicts = parse_junit(junit)
    assert verdicts["baseline"].passed, output
    assert verdicts["agent-actor-restarted"].passed, output
    assert "which this run joined" in str(verdicts["rollout-node-lost"].skipped), output
    assert f"cluster at {cluster.address}" in completed.stdout, output
    assert all(process.is_running() for process in on_hosts.servers().values()), "the joined run stopped ours"
    assert server_actors(net) == actors_before, "the joined run left server actors on the hosts"


def server_actors(net: HostNet) -> int:
    """How many server actors run on the hosts (their processes, named by Ray after the class)."""
    found = 0
    for host in range(net.count):
        for pid in net.pids(host):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            found += b"ray::ServerHost" in command
    return found
