"""RayCluster: the Ray cluster the servers run on, started here (``local:N``, ``hosts:N``) or joined.

A local cluster is N real nodes on this machine, each on a loopback address of its own, as if on
a machine of its own: node k on ``127.0.0.<k+2>`` (the head on 127.0.0.2), while pytest, its
Toxiproxy and its fault layer stay on 127.0.0.1. Each node is one ``ray start --block`` child (``nodes``)
started through the supervisor: its own process group (raylet, agents, the head's GCS), its log, a
deadline to come up, and the session reaper behind it. Ray's workers start sessions of their
own; they die with their raylet, and the reaper also kills, with pytest, every process that
names the cluster's temp dir (which lives under pytest's tmp path). Each node carries a custom
resource ``chaos_node_<k>``: a server is placed by that resource, so an actor Ray restarts after
``node_down`` comes back on the node that replaces the lost one.

Placement is fixed and printed in the run's summary: the policy and the Gym servers other than
agents on node 0 (the head), the agent servers round robin over the other nodes, so losing a
worker node takes agents and nothing else, as when a rollout node dies under a trainer.

``hosts:N`` runs each node on a host of its own (``netns``: a network namespace on a bridge, its
own PID namespace and ``/tmp``), with the head (the GCS, no CPUs, no servers) beside pytest in
the root namespace, as a driver on the head machine: every host is a worker and any can be lost.
Placement is that of ``local:N`` over the hosts, with policy replicas spread: ``policy[i]`` for
i >= 1 on host N-i, as generation engines each on a machine of their own. The servers' logs and
events come back over Ray (``files.FileMirror``), as from a joined node on another machine.

A joined cluster (``ADDRESS``) is used as it is: servers are placed on its live nodes by node
id, the same round robin, each server listening on its node's address. A node on another machine
is accepted when its address answers from here within ``REACH_TIMEOUT_S``; the proxies then
listen on this machine's address in the cluster (``driver_address``), where the servers on that
node reach them, and which a task on each such node must reach too. Nodes of a joined cluster
are not this run's to remove: ``node_down`` refuses them. ``launch`` opens a cluster of each kind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.ray.files import FileMirror
from pytest_rollout_chaos.ray.mode import RayMode
from pytest_rollout_chaos.ray.netns import HostNet
from pytest_rollout_chaos.ray.nodes import (
    LOOPBACK,
    NodeSlot,
    RayClusterError,
    is_this_machine,
    node_spec,
    ray_start_spec,
)
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.procfs import descendant_pids, group_pids
from pytest_rollout_chaos.servers.reaper_client import reaper

_logger = logging.getLogger(__name__)

NODE_GONE_TIMEOUT_S: Final = 30.0  # until the GCS has marked a removed node dead
# Ray names unix sockets under its temp dir (``session_<date>_<pid>/sockets/plasma_store``, 62 more
# characters); their paths may not exceed 107 bytes.
MAX_TEMP_DIR_CHARS: Final = 44


class RayCluster:
    """The cluster of this run: placement, the actors' options, and (local) removing and restoring nodes."""

    def __init__(
        self,
        mode: RayMode,
        slots: Sequence[NodeSlot],
        address: str,
        *,
        dirs: RayDirs,
        env: Mapping[str, str],
        saved_env: Mapping[str, str | None],
        driver_address: str = LOOPBACK,
        net: HostNet | None = None,
    ) -> None:
        self.mode = mode
        self.net = net  # hosts:N: the hosts' namespaces and bridge
        self.driver_address = driver_address  # this machine's address, as the nodes reach it
        self.slots = tuple(slots)
        self.address = address
        self.dirs = dirs
        self._env = dict(env)  # what this run's nodes (and the driver) run with
        self._saved_env = dict(saved_env)  # the driver's environment before, put back at close
        self._nodes: dict[int, ManagedProcess] = {}
        self._head: ManagedProcess | None = None  # hosts:N: the head, beside pytest
        self._lock = threading.Lock()
        self.mirror: FileMirror | None = None  # the files of nodes that share none with this machine

    # -- placement ------------------------------------------------------------------------------
    @property
    def local(self) -> bool:
        """Whether this run started the nodes (and may remove them)."""
        return self.mode.kind in ("local", "hosts")

    def slot_for(self, agent_order: int | None, *, replica: int | None = None) -> NodeSlot:
        """Where the ``agent_order``-th agent runs, or (None) any other server (``replica``: policy
        replica i); see the module docstring."""
        count = len(self.slots)
        if self.net is not None and replica:
            return self.slots[(count - replica) % count]
        if agent_order is None or count == 1:
            return self.slots[0]
        workers = self.slots[1:]
        return workers[agent_order % len(workers)]

    def actor_options(self, slot: NodeSlot) -> dict[str, Any]:
        """Ray options that put an actor on ``slot`` (and back on it after Ray restarts it)."""
        if self.local:
            return {"resources": {slot.resource: 0.001}}
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=slot.node_id, soft=False)}

    def on_this_machine(self, slot: NodeSlot) -> bool:
        """Whether ``slot``'s node runs here, sharing this machine's files and process table (a
        host of ``hosts:N`` does not: it is another machine in all but the kernel)."""
        if self.mode.kind == "hosts":
            return False
        return self.mode.kind == "local" or is_this_machine(slot.address)

    def pull_files(self) -> None:
        """Bring here the logs and events that servers on other machines wrote (no-op when none)."""
        if self.mirror is not None:
            self.mirror.pull()

    def control_peer(self, slot: NodeSlot) -> str:
        """The address this machine's connections to ``slot``'s servers come from: loopback for a
        loopback node, the node's own address for another address of this machine, else this
        machine's address in the cluster. Their control endpoints trust it."""
        if not self.on_this_machine(slot):
            return self.driver_address
        return LOOPBACK if not slot.address or slot.address.startswith("127.") else slot.address

    def describe_slot(self, slot: NodeSlot) -> str:
        """``node 1 (ray node 3f2a9c01)``: how errors and facts name a node."""
        node_id = slot.node_id or self.node_id(slot)
        return f"node {slot.index} (ray node {node_id[:8] or '?'})"

    def node_id(self, slot: NodeSlot) -> str:
        """The Ray node id now behind ``slot`` (a restored node has a new one); '' when none is alive."""
        if slot.node_id:
            return slot.node_id
        import ray

        for node in ray.nodes():
            if node.get("Alive") and node.get("Resources", {}).get(slot.resource):
                return str(node["NodeID"])
        return ""

    def describe(self) -> str:
        addresses = ", ".join(slot.address for slot in self.slots)
        if self.net is not None:
            where = (
                f"{len(self.slots)} hosts (network namespaces) on {addresses}, "
                f"head and pytest on {self.driver_address}"
            )
        elif self.local:
            where = f"{len(self.slots)} local nodes on {addresses}"
        else:
            where = f"cluster at {self.address}"
        return f"ray: {where} ({self.mode.describe()}), temp dir {self.dirs.files}"

    # -- nodes of a local cluster -----------------------------------------------------------------
    def start_node(self, index: int) -> None:
        """Start node ``index`` (``ray start --block``; the head for 0 of ``local:N``, a host's
        node for ``hosts:N``) and wait until it runs."""
        if self.net is not None:
            net = self.net
            spec = ray_start_spec(
                f"ray-host-{index}",
                gcs=self.address,
                head=False,
                node_ip=net.address(index),
                temp_dir=self.dirs.for_ray,
                env=self._env,
                resources={NodeSlot(index).resource: 1},
                boot=lambda argv: net.boot_argv(index, argv, private=(self.dirs.logs, self.dirs.files)),
            )
        else:
            spec = node_spec(index, self.address, self.dirs.for_ray, self._env)
        process = ManagedProcess(spec, self.dirs.logs, run_id=self.dirs.run_id)
        process.start()
        with self._lock:
            self._nodes[index] = process

    def start_head(self) -> None:
        """``hosts:N``: the head beside pytest on the bridge, with no CPUs and no placement resource."""
        spec = ray_start_spec(
            "ray-head",
            gcs=self.address,
            head=True,
            node_ip=self.driver_address,
            temp_dir=self.dirs.for_ray,
            env=self._env,
            resources={},
            cpus=0,
        )
        process = ManagedProcess(spec, self.dirs.logs, run_id=self.dirs.run_id)
        process.start()
        self._head = process

    def node_process(self, slot: NodeSlot) -> ManagedProcess:
        """The ``ray start`` child of a node this run started."""
        if not self.local:
            raise RayClusterError(
                f"{self.describe_slot(slot)} belongs to the cluster at {self.address}, which this run "
                "joined: only nodes of --rollout-chaos-ray=local:N can be removed"
            )
        if slot.index == 0 and self.net is None:
            raise RayClusterError(
                "node 0 is the head node: removing it ends the cluster (its GCS); "
                "choose a server placed on a worker node (an agent, with local:2 or more)"
            )
        with self._lock:
            return self._nodes[slot.index]

    def remove_node(self, slot: NodeSlot) -> dict[str, object]:
        """Take node ``slot`` away at once, as a machine that loses power: its raylet, its agents and
        every worker on it are SIGKILLed together. Returns what was killed."""
        process = self.node_process(slot)
        node_id = self.node_id(slot)
        if self.mirror is not None:
            self.mirror.pull()  # what it wrote until now, as a log shipper would have sent it
            self.mirror.set_down(slot.index, True)
        raylet_pids = group_pids(process.pid)
        workers = sorted({child for pid in raylet_pids for child in descendant_pids(pid)} - set(raylet_pids))
        process.expect_exit()
        process.signal(signal.SIGKILL)  # on a host: its first process, so the kernel kills all of it
        for pid in workers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if self.net is not None:
            self.net.kill(slot.index)  # nothing of the host outlives it
        process.stop()  # reaps the node's `ray start` and closes its log; everything is dead already
        return {
            "node": slot.index,
            "node_id": node_id,
            "node_processes": len(raylet_pids),
            "workers": len(workers),
        }

    def wait_node_dead(self, node_id: str, timeout_s: float = NODE_GONE_TIMEOUT_S) -> float:
        """Seconds until the GCS marked ``node_id`` dead; ``RayClusterError`` after ``timeout_s``."""
        import ray

        started = time.monotonic()
        while any(node["NodeID"] == node_id and node.get("Alive") for node in ray.nodes()):
            if time.monotonic() - started > timeout_s:
                raise RayClusterError(
                    f"ray node {node_id[:8]} still alive {timeout_s:.0f}s after it was removed"
                )
            time.sleep(0.2)
        return time.monotonic() - started

    def restore_node(self, slot: NodeSlot) -> None:
        """Start a node in place of a removed one, with the same resource (a new Ray node id)."""
        if not self.node_process(slot).is_running():
            self.start_node(slot.index)
        if self.mirror is not None:
            self.mirror.set_down(slot.index, False)

    def lose_host(self, slot: NodeSlot) -> dict[str, object]:
        """``hosts:N``: host ``slot`` is lost, as a machine that loses power: first it goes silent, so
        that nothing it says as it dies (no FIN, no RST) leaves and nothing sent to it is answered,
        then every process of it is killed at once. What it wrote until then is copied here first.
        Returns what was lost."""
        net = self._net(slot)
        if self.mirror is not None:
            self.mirror.pull()
            self.mirror.set_down(slot.index, True)
        net.isolate(slot.index)
        processes = len(net.pids(slot.index))
        facts = self.remove_node(slot)
        return {**facts, "host": net.netns(slot.index), "address": slot.address, "host_processes": processes}

    def restore_host(self, slot: NodeSlot) -> None:
        """Let host ``slot`` be heard again, its peers' old connections to it closed as a reboot's
        time would have closed them (``HostNet.forget``), and boot its node again (an empty ``/tmp``)."""
        net = self._net(slot)
        net.forget(slot.index)
        net.rejoin(slot.index)
        self.restore_node(slot)

    def cut(self, a: NodeSlot, b: NodeSlot, *, ports_to: dict[int, list[int]]) -> int:
        """Partition the hosts of ``a`` and ``b`` both ways (``HostNet.cut``); the rules added."""
        return self._net(a).cut(a.index, b.index, ports_to=ports_to)

    def mend(self, a: NodeSlot, b: NodeSlot) -> None:
        self._net(a).mend(a.index, b.index)

    def _net(self, slot: NodeSlot) -> HostNet:
        if self.net is None:
            raise RayClusterError(
                f"{self.describe_slot(slot)} is not a host of its own: only --rollout-chaos-ray=hosts:N "
                f"runs nodes in namespaces that can be silenced or cut apart (this run: "
                f"{self.mode.describe()})"
            )
        return self.net

    def close(self) -> None:
        """Disconnect, then stop every node this run started (workers go with their raylets)."""
        import ray

        if self.mirror is not None:
            with contextlib.suppress(Exception):
                self.mirror.close()
        with contextlib.suppress(Exception):
            ray.shutdown()
        with self._lock:
            nodes = list(self._nodes.values())
        if self._head is not None:
            nodes.insert(0, self._head)
        for process in reversed(nodes):  # worker nodes first, the head (GCS) last
            with contextlib.suppress(Exception):
                process.stop()
        if self.net is not None:
            self.net.close()
        for pid in _naming(self.dirs.named):  # a worker still starting when its raylet went
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for path in self.dirs.named:
            reaper().remove_path(path)
        restore_env(self._saved_env)
        remove_short_path(self.dirs.for_ray)


@dataclass(frozen=True, slots=True)
class RayDirs:
    """Where a cluster's files go: ``files`` under pytest's tmp path, which Ray is given as ``for_ray``
    (the same, or a short link to it); the nodes' logs; the run they belong to."""

    files: Path
    for_ray: Path
    logs: Path
    run_id: str

    @property
    def named(self) -> set[Path]:
        """The paths Ray's processes name on their command lines (one or the other)."""
        return {self.files, self.for_ray}


def short_path(temp_dir: Path) -> Path:
    """``temp_dir``, or a short link to it in the system temp dir when Ray's socket paths would not fit."""
    if len(str(temp_dir)) <= MAX_TEMP_DIR_CHARS:
        return temp_dir
    link = Path(tempfile.mkdtemp(prefix="rc-ray-")) / "t"
    link.symlink_to(temp_dir, target_is_directory=True)
    return link


def remove_short_path(temp_dir: Path) -> None:
    if temp_dir.is_symlink():
        with contextlib.suppress(OSError):
            temp_dir.unlink()
            temp_dir.parent.rmdir()


def restore_env(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    reload_auth_settings()


def reload_auth_settings() -> None:
    """Make an already imported Ray read ``RAY_AUTH_MODE`` and ``RAY_AUTH_TOKEN`` again: it reads them
    once, when first imported (what Ray's own switch to token auth does after setting them)."""
    import ray._raylet

    ray._raylet.Config.initialize("")
    ray._raylet.AuthenticationTokenLoader.instance().reset_cache()


def _naming(paths: set[Path]) -> list[int]:
    from pytest_rollout_chaos.servers.reaper import naming

    return naming({str(path) for path in paths})
