"""Opening the cluster of a run: ``local:N`` and ``hosts:N`` started here, or a cluster joined at
its address, with pytest connected to it as the driver.

``local:N`` starts node k on ``127.0.0.<k+2>``, the head first; ``hosts:N`` makes the hosts
(``netns``), the head beside pytest on the bridge, then one node per host. Nodes start one at a
time, each through the supervisor, and the run goes on once all have joined. A joined cluster's
nodes on other machines must answer from here and reach here (``nodes.check_reachable``,
``nodes.check_reaches_driver``). The files of every node that shares none with this machine are
copied here (``files.FileMirror``). On any failure what was started is stopped and the
environment put back.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path

from pytest_rollout_chaos.ray.cluster import (
    RayCluster,
    RayDirs,
    reload_auth_settings,
    remove_short_path,
    restore_env,
    short_path,
)
from pytest_rollout_chaos.ray.files import FileMirror
from pytest_rollout_chaos.ray.mode import RayMode
from pytest_rollout_chaos.ray.netns import HostNet
from pytest_rollout_chaos.ray.nodes import (
    LOOPBACK,
    NODE_READY_TIMEOUT_S,
    NodeSlot,
    RayClusterError,
    check_bindable,
    check_reachable,
    check_reaches_driver,
    is_this_machine,
    node_address,
)
from pytest_rollout_chaos.servers.ports import free_port
from pytest_rollout_chaos.servers.reaper_client import reaper


def open_cluster(mode: RayMode, temp_dir: Path, log_dir: Path, run_id: str) -> RayCluster:
    """Start (local) or join (address) the cluster and connect this process to it as the driver.

    Ray's files go to ``temp_dir`` (under pytest's tmp path). When that path is too long for
    the unix sockets Ray makes under it, Ray is given a short symbolic link to it instead.
    """
    dirs = RayDirs(files=temp_dir, for_ray=short_path(temp_dir), logs=log_dir, run_id=run_id)
    env = {"RAY_TMPDIR": str(dirs.for_ray)}  # Ray writes its "current cluster" file there, not /tmp/ray
    if mode.kind in ("local", "hosts"):
        # A token of this run's own: a local ray.init() elsewhere leaves ~/.ray/auth_token behind,
        # which would switch our nodes to token auth with a token the others do not send.
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    reload_auth_settings()
    for path in dirs.named:
        reaper().add_path(path)
    try:
        if mode.kind == "local":
            return _start_local(mode, dirs, env, saved)
        if mode.kind == "hosts":
            return _start_hosts(mode, dirs, env, saved)
        return _join(mode, dirs, env, saved)
    except BaseException:
        restore_env(saved)
        remove_short_path(dirs.for_ray)
        raise


def _start_local(
    mode: RayMode, dirs: RayDirs, env: Mapping[str, str], saved: Mapping[str, str | None]
) -> RayCluster:
    slots = [NodeSlot(index, address=node_address(index)) for index in range(mode.nodes)]
    check_bindable(mode, [slot.address for slot in slots])
    address = f"{slots[0].address}:{free_port(slots[0].address)}"  # the head's GCS
    cluster = RayCluster(mode, slots, address, dirs=dirs, env=env, saved_env=saved)
    try:
        for index in range(mode.nodes):  # one at a time: nodes starting together race for ports
            cluster.start_node(index)
        _connect(address, node_ip=slots[0].address)  # the driver joins as a process of the head's machine
        _wait_nodes(mode.nodes)
    except BaseException:
        cluster.close()
        raise
    return cluster


def _start_hosts(
    mode: RayMode, dirs: RayDirs, env: Mapping[str, str], saved: Mapping[str, str | None]
) -> RayCluster:
    net = HostNet.open(mode.nodes, dirs.run_id)
    slots = [NodeSlot(index, address=net.address(index)) for index in range(mode.nodes)]
    address = f"{net.driver_address}:{free_port(net.driver_address)}"  # the head's GCS, beside pytest
    cluster = RayCluster(
        mode, slots, address, dirs=dirs, env=env, saved_env=saved, driver_address=net.driver_address, net=net
    )
    try:
        cluster.start_head()
        for index in range(mode.nodes):  # one at a time: nodes starting together race for the GCS
            cluster.start_node(index)
        _connect(address, node_ip=net.driver_address)
        _wait_nodes(mode.nodes + 1)
        _mirror(cluster)
    except BaseException:
        cluster.close()
        raise
    return cluster


def _mirror(cluster: RayCluster) -> None:
    """Copy here the files of the cluster's nodes that share none with this machine, if any."""
    elsewhere = {
        slot.index: cluster.actor_options(slot) for slot in cluster.slots if not cluster.on_this_machine(slot)
    }
    if elsewhere:
        cluster.mirror = FileMirror(cluster.dirs.logs, elsewhere)
        cluster.mirror.start()


def _connect(address: str, *, node_ip: str | None = None) -> None:
    import ray

    if ray.is_initialized():
        raise RayClusterError(
            "--rollout-chaos-ray: this process is already connected to a Ray cluster; "
            "leave ray.init() to the plugin (or pass the cluster's address as --rollout-chaos-ray=HOST:PORT)"
        )
    try:
        ray.init(
            address=address,
            logging_level="WARNING",
            log_to_driver=False,
            configure_logging=False,
            namespace="rollout-chaos",
            **({"_node_ip_address": node_ip} if node_ip else {}),
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise RayClusterError(
            f"--rollout-chaos-ray: cannot connect to the Ray cluster at {address}: {error}"
        ) from None


def _wait_nodes(count: int, timeout_s: float = NODE_READY_TIMEOUT_S) -> None:
    import ray

    started = time.monotonic()
    while (alive := sum(1 for node in ray.nodes() if node.get("Alive"))) < count:
        if time.monotonic() - started > timeout_s:
            raise RayClusterError(
                f"--rollout-chaos-ray: {alive} of {count} nodes joined within {timeout_s:.0f}s"
            )
        time.sleep(0.2)


def _join(
    mode: RayMode, dirs: RayDirs, env: Mapping[str, str], saved: Mapping[str, str | None]
) -> RayCluster:
    _connect(mode.address)
    import ray

    nodes = sorted(
        (node for node in ray.nodes() if node.get("Alive")),
        key=lambda node: (not node.get("Resources", {}).get("node:__internal_head__"), node["NodeID"]),
    )
    remote = [node for node in nodes if not is_this_machine(str(node.get("NodeManagerAddress", "")))]
    driver = LOOPBACK
    if remote:
        driver = str(ray.util.get_node_ip_address())  # where the nodes elsewhere reach this machine
        try:
            check_reachable(mode, remote)
            check_reaches_driver(mode, remote, driver)
        except RayClusterError:
            ray.shutdown()
            raise
    slots = [
        NodeSlot(index, node_id=str(node["NodeID"]), address=str(node.get("NodeManagerAddress", "")))
        for index, node in enumerate(nodes)
    ]
    cluster = RayCluster(
        mode, slots, mode.address, dirs=dirs, env=env, saved_env=saved, driver_address=driver
    )
    _mirror(cluster)
    return cluster
