"""RayHostedProcess: a ``ManagedProcess`` whose child runs in a Ray actor on a node of the cluster.

pytest's side keeps the supervisor's contract (start with a deadline, stop on every path, exit
listeners, restart on the same port, signals to the whole group), so the stack, the reset and
the process faults need not know where a server runs. What differs is who owns the child: a
``ServerHost`` actor, created with ``max_restarts=0`` (Ray's default, and NeMo RL's for its
NemoGym actor since NVIDIA-NeMo/RL#3368), so an actor that dies stays dead, as a killed process
does, until ``restart`` creates a new one on the same node, whose ``__init__`` brings the server
back on its port (what Ray's own restart of the actor would run).

A watcher thread follows the child across its lives: an exit of the server, the actor's death
(its server dies with it: exit code -9, SIGKILL), and a server started again (a new pid on the
same port). Every Ray call has a deadline. A server listens on its node's address, which the
actor reports. For a node on this machine (every node of ``local:N``, each on its own loopback
address) liveness and signals go through ``/proc`` and ``killpg`` like a local child's; for a node
on another machine they go through the actor, and pytest's reaper leaves its pids alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Final, Protocol

from pytest_rollout_chaos.errors import ServerStartError
from pytest_rollout_chaos.ray.cluster import RayCluster
from pytest_rollout_chaos.ray.host import ServerHost
from pytest_rollout_chaos.ray.nodes import NodeSlot
from pytest_rollout_chaos.servers.gym.stack import HEAD_NAME, MODEL_NAME, RESOURCES_NAME
from pytest_rollout_chaos.servers.nemo_gym.stack import ENV_NAME
from pytest_rollout_chaos.servers.policy.replicas import POLICY, replica_of
from pytest_rollout_chaos.servers.process import LOG_TAIL_LINES, ManagedProcess, ServerSpec
from pytest_rollout_chaos.servers.procfs import alive
from pytest_rollout_chaos.servers.reaper_client import reaper

ACTOR_START_S: Final = 60.0  # scheduling the actor and its worker, beyond the server's own readiness
CALL_S: Final = 10.0
WATCH_S: Final = 5.0
EXIT_CODE_WAIT_S: Final = 2.0
KILLED: Final = -int(signal.SIGKILL)  # how a server ended when its actor died
# Every server but the agents stays on the head node (as the stack builders name them), every
# policy replica (``policy[i]``) included, each in its own actor.
HEAD_NODE_SERVERS: Final = frozenset({"policy", MODEL_NAME, RESOURCES_NAME, HEAD_NAME, ENV_NAME})


def on_head_node(name: str) -> bool:
    """Whether server ``name`` runs on the head node: all but the agents."""
    return name in HEAD_NODE_SERVERS or replica_of(name)[0] == POLICY


class RayHostedProcess(ManagedProcess):
    """One server in a ``ServerHost`` actor placed on ``slot``; see the module docstring."""

    def __init__(
        self, spec: ServerSpec, log_dir: Path, *, run_id: str, cluster: RayCluster, slot: NodeSlot
    ) -> None:
        super().__init__(spec, log_dir, run_id=run_id)
        self.cluster = cluster
        self.slot = slot
        self._port = 0  # 0: the first actor picks a free one on its node; later ones reuse it
        self._actor: Any = None
        self._info: dict[str, Any] = {}
        self._code: int | None = None
        self._generation = 0
        self._state = threading.Condition()
        self._closing = threading.Event()  # set by stop: the current actor's watcher ends

    # -- what the faults and reports ask ---------------------------------------------------------
    @property
    def actor(self) -> Any:
        if self._actor is None:
            raise RuntimeError(f"server {self.name!r} was never started")
        return self._actor

    @property
    def worker_pid(self) -> int:
        """The pid of the Ray worker process that is the actor (the server's parent)."""
        return int(self._info["worker_pid"])

    def node(self) -> str:
        """``node 1 (ray node 3f2a9c01)``: the node the server was last started on."""
        node_id = str(self._info.get("node_id") or "")
        return (
            f"node {self.slot.index} (ray node {node_id[:8]})"
            if node_id
            else self.cluster.describe_slot(self.slot)
        )

    def gpus_text(self) -> str:
        """`` (GPUs 0,1)``: the devices Ray gave the server; '' for a server that asks for none."""
        ids = self._info.get("gpu_ids") or []
        return f" (GPUs {','.join(map(str, ids))})" if ids else ""

    def where(self) -> str:
        """``calculator_agent on node 1 (ray node 3f2a9c01)``."""
        return f"{self.name} on {self.node()}"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the server's log: on another machine, as copied here now."""
        if not self.here:
            self.cluster.pull_files()
        return super().log_tail(lines)

    # -- ManagedProcess -------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        if "pid" not in self._info:
            raise RuntimeError(f"server {self.name!r} was never started")
        return int(self._info["pid"])

    def address(self) -> tuple[str, int] | None:
        """Where the server listens: its node's address and its port, as its actor reported."""
        if not self._info or not self._info.get("address"):
            return None
        host, port = self._info["address"]
        return str(host), int(port)

    @property
    def here(self) -> bool:
        """Whether the server runs on this machine, where ``/proc`` and ``killpg`` reach it."""
        return self.cluster.on_this_machine(self.slot)

    def exit_code(self) -> int | None:
        with self._state:
            if not self._info:
                return None
            if self._code is not None:
                return self._code
            pid = int(self._info["pid"])
        if alive(pid) if self.here else self._remote_alive():
            return None
        with self._state:  # gone: the watcher hears the code from the actor, or that the actor died
            self._state.wait_for(lambda: self._code is not None, timeout=EXIT_CODE_WAIT_S)
            return self._code if self._code is not None else KILLED

    def is_running(self) -> bool:
        return bool(self._info) and self.exit_code() is None

    def signal(self, sig: int) -> None:
        if not self._info:
            return
        if self.here:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
            return
        import ray

        with contextlib.suppress(Exception):  # a dead actor: its server is gone with it
            ray.get(self.actor.signal.remote(sig), timeout=CALL_S)

    def _remote_alive(self) -> bool:
        import ray

        try:
            return ray.get(self.actor.wait_exit.remote(0.0), timeout=CALL_S) is None
        except Exception:
            return False

    def start(self, *, ready_delay_s: float = 0.0) -> None:
        """Create the actor on its node and wait until its server is ready; on failure leave nothing."""
        import ray

        self._closing = threading.Event()
        self._actor = (
            ray.remote(ServerHost)
            .options(
                num_cpus=0,
                num_gpus=self.spec.gpus,  # Ray hides every GPU from an actor that asks for none
                max_restarts=0,
                max_concurrency=4,
                **self.cluster.actor_options(self.slot),
            )
            .remote(
                self.spec,
                str(self._log_dir),
                self._run_id,
                self._port,
                ready_delay_s,
                control_peer=self.cluster.control_peer(self.slot),
            )
        )
        self.started_at = time.monotonic()
        try:
            info = ray.get(self._actor.describe.remote(), timeout=self.spec.ready_timeout_s + ACTOR_START_S)
        except Exception as error:
            with contextlib.suppress(Exception):
                ray.kill(self._actor, no_restart=True)
            raise ServerStartError(
                f"server {self.name!r} could not be started in its Ray actor on "
                f"{self.cluster.describe_slot(self.slot)}: {type(error).__name__}: {error}\n"
                + (
                    f"it asked Ray for {self.spec.gpus} GPU(s): a node without that many free GPUs "
                    "never schedules it (see ray.cluster_resources())\n"
                    if self.spec.gpus
                    else ""
                )
                + f"command: {self.command_line()}\nlast log lines ({self.log_path}):\n{self.log_tail()}"
            ) from None
        self._adopt(info)
        threading.Thread(
            target=self._watch, args=(self._actor, self._closing), name=f"ray-watch-{self.name}", daemon=True
        ).start()

    def stop(self) -> int | None:
        """Stop the server, then the actor for good; idempotent."""
        import ray

        if self._actor is None:
            return None
        self._closing.set()
        with self._state:
            self._state.notify_all()
        self._expected_exit = True
        code = None
        with contextlib.suppress(Exception):
            code = ray.get(self._actor.stop.remote(), timeout=self.spec.stop_timeout_s + CALL_S)
        with contextlib.suppress(Exception):
            ray.kill(self._actor, no_restart=True)
        if self._info and self.here:
            self.signal(signal.SIGKILL)  # whatever the actor could not stop
            reaper().remove(self.pid)
        # ``ray.kill`` only asks: a call made on the handle now may still run in the dying actor
        # (a restart there started a server that outlived the stop), so none is made on it again
        self._actor = None
        return code

    def restart(self, *, ready_delay_s: float = 0.0) -> None:
        """The server again on its port: in its actor while that lives, else in a new actor (after
        ``stop``, or when the actor is gone, as Ray's own restart would make)."""
        import ray

        self._expected_exit = False
        if self._actor is not None:  # ``stop`` drops the handle of an actor it killed
            try:
                info = ray.get(
                    self.actor.restart.remote(ready_delay_s),
                    timeout=self.spec.ready_timeout_s + ready_delay_s + CALL_S,
                )
            except ray.exceptions.RayActorError:
                self.stop()
            except ray.exceptions.GetTimeoutError:
                raise ServerStartError(
                    f"server {self.name!r}: its actor on {self.cluster.describe_slot(self.slot)} "
                    "did not restart it "
                    f"within {self.spec.ready_timeout_s + ready_delay_s + CALL_S:.0f}s (is its node there?)"
                ) from None
            else:
                self._adopt(info)
                return
        self.start(ready_delay_s=ready_delay_s)
        self._expected_exit = False

    # -- Ray's side -------------------------------------------------------------------------------
    def kill_actor(self) -> dict[str, object]:
        """``ray.kill`` the actor; its server dies with it."""
        import ray

        worker_pid = self.worker_pid
        self.expect_exit()
        ray.kill(self.actor)
        return {"actor": self.actor._actor_id.hex()[:12], "worker_pid": worker_pid}

    def lost(self) -> None:
        """The server's node is gone with everything on it (a fault removed it): its exit is known
        now, not when Ray declares the node dead; ``restart`` makes a new actor (its node back)."""
        self.expect_exit()
        self._closing.set()
        self._actor = None  # dead with its node: no call is made on it again
        if self._info and self.here:
            reaper().remove(self.pid)
        self._exited(KILLED)

    def _adopt(self, info: dict[str, Any]) -> None:
        with self._state:
            if self._info and self.here:
                reaper().remove(int(self._info["pid"]))
            self._info = info
            self._port = int(info["address"][1])  # a new actor brings the server back on this port
            self._code = None
            self._generation += 1
            self.ready_after_s = info.get("ready_after_s")
            self._state.notify_all()
        if self.here:  # pytest's reaper too: the server dies with pytest however it ends
            reaper().add(int(info["pid"]))

    def _exited(self, code: int) -> None:
        with self._state:
            if self._code is not None:
                return
            self._code = code
            self._state.notify_all()
        self._tell_exit_listeners(code)

    def _watch(self, actor: Any, closing: threading.Event) -> None:
        """Report each exit of ``actor``'s server (its own, or the actor's death) until ``closing``."""
        import ray

        while not closing.is_set():
            try:
                code = ray.get(actor.wait_exit.remote(WATCH_S), timeout=WATCH_S + CALL_S)
            except ray.exceptions.GetTimeoutError:
                continue
            except ray.exceptions.RayActorError:
                code = KILLED
            except Exception:  # Ray shut down under us: the session is ending
                return
            if code is None:
                continue
            generation = self._generation
            self._exited(code)
            with self._state:  # until the server is started again (in this actor or a new one)
                while self._generation == generation and not closing.is_set():
                    self._state.wait(timeout=0.5)


class ProcessOwner(Protocol):
    """Who keeps the hosted processes: starts them, stops them at session end, names their logs.

    The session's harness (``harness.ChaosHarness``) is one; this layer names only what it uses.
    """

    @property
    def log_dir(self) -> Path: ...

    @property
    def run_id(self) -> str: ...

    def adopt(self, process: ManagedProcess) -> ManagedProcess: ...


class HostedStart:
    """The ``start(spec)`` of the policy and Gym fixtures with Ray on: each server in an actor on its node."""

    def __init__(self, owner: ProcessOwner, cluster: RayCluster) -> None:
        self._owner = owner
        self.cluster = cluster
        self._agents = 0
        self._slots: dict[str, NodeSlot] = {}
        self._lock = threading.Lock()
        self.placed: dict[str, RayHostedProcess] = {}

    def place(self, name: str) -> NodeSlot:
        """The node server ``name`` runs on, chosen at the first ask and kept."""
        with self._lock:
            if name not in self._slots:
                if on_head_node(name):
                    base, index = replica_of(name)
                    self._slots[name] = self.cluster.slot_for(None, replica=index if base == POLICY else None)
                else:
                    self._slots[name] = self.cluster.slot_for(self._agents)
                    self._agents += 1
            return self._slots[name]

    def host_for(self, name: str) -> str:
        """The address server ``name`` will listen on, for servers told theirs in a config (NeMo Gym)."""
        return self.place(name).address or "127.0.0.1"

    def __call__(self, spec: ServerSpec) -> ManagedProcess:
        slot = self.place(spec.name)
        process = RayHostedProcess(
            spec, self._owner.log_dir, run_id=self._owner.run_id, cluster=self.cluster, slot=slot
        )
        self._owner.adopt(process)
        self.placed[spec.name] = process
        return process

    def describe(self) -> str:
        where = ", ".join(
            f"{name} -> node {process.slot.index}{process.gpus_text()}"
            for name, process in self.placed.items()
        )
        return f"ray placement: {where}"
