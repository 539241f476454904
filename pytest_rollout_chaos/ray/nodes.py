"""The nodes of the Ray cluster: where each runs, the ``ray start`` child that runs a node of
``local:N``, and which nodes of a joined cluster are accepted.

Node k of ``local:N`` runs on ``127.0.0.<k+2>`` and carries the custom resource
``chaos_node_<k>`` that servers are placed by; 127.0.0.1 stays pytest's own. A node of a joined
cluster on another machine is accepted when its raylet answers from here within
``REACH_TIMEOUT_S``.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.errors import ChaosError
from pytest_rollout_chaos.ray.mode import RayMode
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.process import ServerSpec

NODE_CPUS: Final = 1
OBJECT_STORE_BYTES: Final = 80 * 1024 * 1024  # Ray's floor is 75 MiB; the servers put nothing there
NODE_READY_TIMEOUT_S: Final = 90.0
# A lost node is declared dead after about period x threshold (Ray's defaults take 15 s and more).
HEALTH_CHECK: Final = {
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 2000,
    "health_check_failure_threshold": 4,
}
RESOURCE_PREFIX: Final = "chaos_node_"
# Node k of local:N runs on 127.0.0.<k + FIRST_NODE_HOST>; 127.0.0.1 stays pytest's own.
FIRST_NODE_HOST: Final = 2
LOOPBACK: Final = "127.0.0.1"
REACH_TIMEOUT_S: Final = 5.0  # for every node of a joined cluster on another machine to answer


class RayClusterError(ChaosError):
    """The cluster could not be started, joined or changed."""


@dataclass(frozen=True, slots=True)
class NodeSlot:
    """One place servers are put: node ``index`` of the cluster."""

    index: int
    node_id: str = ""  # joined clusters: the Ray node id; local ones: read when needed
    address: str = ""  # the node's IP address, where its servers listen

    @property
    def resource(self) -> str:
        return f"{RESOURCE_PREFIX}{self.index}"


def node_spec(index: int, address: str, temp_dir: Path, env: dict[str, str]) -> ServerSpec:
    """The ``ray start --block`` child of node ``index`` of ``local:N`` (the head, with the GCS at
    ``address``, for 0)."""
    return ray_start_spec(
        f"ray-node-{index}",
        gcs=address,
        head=index == 0,
        node_ip=node_address(index),
        temp_dir=temp_dir,
        env=env,
        resources={NodeSlot(index).resource: 1},
    )


def ray_start_spec(
    name: str,
    *,
    gcs: str,
    head: bool,
    node_ip: str,
    temp_dir: Path,
    env: dict[str, str],
    resources: Mapping[str, float],
    cpus: int = NODE_CPUS,
    boot: Callable[[Sequence[str]], Sequence[str]] | None = None,
) -> ServerSpec:
    """One ``ray start --block`` child: the head (its GCS at ``gcs``) or a node joining it, on
    ``node_ip``; ``boot`` wraps the command (a host of ``hosts:N`` runs it in its namespaces)."""
    argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--disable-usage-stats"]
    if head:
        argv += [
            "--head",
            f"--port={gcs.rpartition(':')[2]}",
            "--include-dashboard=false",
            f"--temp-dir={temp_dir}",
            f"--system-config={json.dumps(HEALTH_CHECK)}",
        ]
    else:
        argv.append(f"--address={gcs}")
    argv += [
        f"--node-ip-address={node_ip}",
        f"--num-cpus={cpus}",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        f"--resources={json.dumps(dict(resources))}",
    ]
    return ServerSpec(
        name=name,
        argv=tuple(boot(argv) if boot is not None else argv),
        probe=readiness.log_line("Ray runtime started"),
        env=env,
        ready_timeout_s=NODE_READY_TIMEOUT_S,
        stop_timeout_s=3.0,  # a node that takes longer to leave is killed, as its processes would be
        hint="run `ray start --head --block` by hand; is Ray installed "
        "(pip install 'pytest-rollout-chaos[ray]')?",
    )


def node_address(index: int) -> str:
    """The loopback address node ``index`` of ``local:N`` runs on: 127.0.0.2 for the head, then .3, ..."""
    return f"127.0.0.{FIRST_NODE_HOST + index}"


def check_bindable(mode: RayMode, addresses: Sequence[str]) -> None:
    """``RayClusterError`` naming the first of ``addresses`` this machine cannot listen on."""
    for index, address in enumerate(addresses):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind((address, 0))
        except OSError as error:
            raise RayClusterError(
                f"--rollout-chaos-ray={mode.describe()}: node {index} runs on the loopback address "
                f"{address}, which this machine cannot listen on ({error}); local:N puts node k on "
                f"127.0.0.<k+{FIRST_NODE_HOST}>, which Linux routes to loopback by itself (elsewhere add "
                f"the address to the loopback interface, e.g. `ifconfig lo0 alias {address}`)"
            ) from None


def check_reachable(
    mode: RayMode, nodes: Sequence[Mapping[str, Any]], timeout_s: float = REACH_TIMEOUT_S
) -> None:
    """``RayClusterError`` naming each node (as ``ray.nodes()`` lists them) whose address does not
    answer a TCP connection to its raylet within ``timeout_s``; all are tried at once."""
    from concurrent.futures import ThreadPoolExecutor

    def problem(node: Mapping[str, Any]) -> str | None:
        host, port = str(node.get("NodeManagerAddress", "")), int(node.get("NodeManagerPort") or 0)
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return None
        except OSError as error:
            return f"node {str(node.get('NodeID', ''))[:8]} at {host}:{port}: {error or type(error).__name__}"

    with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
        problems = [text for text in pool.map(problem, nodes) if text is not None]
    if problems:
        raise RayClusterError(
            f"--rollout-chaos-ray={mode.describe()}: the cluster has nodes on other machines whose "
            f"addresses do not answer from this one within {timeout_s:g}s: {'; '.join(problems)}. "
            "The servers on a node listen on its address, and this machine's proxies must reach them "
            "there (and the node must reach this machine's address): open those ports, or leave the "
            "node out of the cluster"
        )


def check_reaches_driver(
    mode: RayMode,
    nodes: Sequence[Mapping[str, Any]],
    driver_address: str,
    *,
    timeout_s: float = REACH_TIMEOUT_S,
    port: int = 0,
) -> None:
    """``RayClusterError`` naming each node (as ``ray.nodes()`` lists them) from which a task cannot
    open a TCP connection to ``driver_address`` (a listener there, on ``port`` or one the OS picks)
    within ``timeout_s``: the proxies listen there, and the node's servers call through them."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    with socket.create_server((driver_address, port)) as listener:  # connections complete unaccepted
        port = int(listener.getsockname()[1])
        probe = ray.remote(num_cpus=0, max_retries=0)(connect_back)
        refs = {
            probe.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=str(node["NodeID"]), soft=False)
            ).remote(driver_address, port, timeout_s): node
            for node in nodes
        }
        wait_s = timeout_s + REACH_TIMEOUT_S  # the task's own scheduling, beyond its connection
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=wait_s)
        problems = []
        for ref, node in refs.items():
            where = f"node {str(node.get('NodeID', ''))[:8]} at {node.get('NodeManagerAddress', '?')}"
            try:
                error = ray.get(ref, timeout=0) if ref in ready else f"no answer within {wait_s:g}s"
            except Exception as failure:  # the task could not run there
                error = f"{type(failure).__name__}: {failure}"
            if error:
                problems.append(f"{where}: {error}")
    if problems:
        raise RayClusterError(
            f"--rollout-chaos-ray={mode.describe()}: the cluster has nodes on other machines that cannot "
            f"reach this one at {driver_address} (tried port {port}) within {timeout_s:g}s: "
            f"{'; '.join(problems)}. The proxies listen on this machine's address in the cluster and the "
            "servers on a node call each other through them: open this machine's ports to the node, or "
            "leave the node out of the cluster"
        )


def connect_back(host: str, port: int, timeout_s: float) -> str:
    """On a node: '' when a TCP connection to ``host:port`` opens within ``timeout_s``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return ""
    except OSError as error:
        return str(error) or type(error).__name__


def is_this_machine(address: str) -> bool:
    """Whether ``address`` is this machine's: any loopback address, one of its names, or an address
    a socket here can bind (any interface's, a bridge's among them)."""
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(address).is_loopback:
            return True
    return address in _local_addresses() or _bindable(address)


def _bindable(address: str) -> bool:
    try:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except (OSError, ValueError):
        return False
    return True


@functools.cache
def _local_addresses() -> frozenset[str]:
    addresses = {"127.0.0.1", "localhost", socket.gethostname()}
    with contextlib.suppress(OSError):
        addresses.update(str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None))
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        addresses.add(probe.getsockname()[0])
    return frozenset(str(address) for address in addresses)
