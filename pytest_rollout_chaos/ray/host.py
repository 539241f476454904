"""ServerHost: the Ray actor that runs one server process on its node, and reports where it listens.

The actor owns the server the way the supervisor does in pytest's process: a ``ManagedProcess``
(own process group, log, readiness with a deadline). That child is registered with a reaper
started by the actor's worker, so when Ray kills the actor (``ray.kill``, a node lost, the memory
monitor) the server goes with it, as a server a trainer's actor spawned does. The port is fixed
at creation, so a new actor made with the same arguments brings the server back where the
proxies point. The server listens on the node's address (``ray.util.get_node_ip_address``), on
that address only, as it would on its own machine: our servers are told through ``HOST_ENV``,
programs that take ``--host`` (vLLM) get it rewritten. Ports are chosen here, on the node where
the server listens: ours bind the port ``PORT_ENV`` names (one free on the node at the first
start), a program given ``--port`` (vLLM) gets one free on the node instead. A server that needs GPUs
(``ServerSpec.gpus``) gets the ones Ray assigned the actor as its ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from pytest_rollout_chaos.servers.loopback import CONTROL_PEER_ENV
from pytest_rollout_chaos.servers.ports import free_port
from pytest_rollout_chaos.servers.process import (
    HOST_ENV,
    PORT_ENV,
    READY_DELAY_ENV,
    ManagedProcess,
    ServerSpec,
)

WAIT_POLL_S = 0.05
CUDA_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"


class ServerHost:
    """One server in one actor; every method answers within its own bounded wait."""

    def __init__(
        self,
        spec: ServerSpec,
        log_dir: str,
        run_id: str,
        port: int,
        ready_delay_s: float = 0.0,
        *,
        control_peer: str = "",
    ) -> None:
        import ray

        host = ray.util.get_node_ip_address()
        env = {**spec.env}
        if control_peer:  # where pytest's calls to the server's control endpoints come from
            env[CONTROL_PEER_ENV] = control_peer
        self._gpu_ids: list[str] = []
        if spec.gpus > 0:  # the devices Ray assigned this actor, and only those
            self._gpu_ids = [str(gpu) for gpu in ray.get_gpu_ids()]
            env[CUDA_DEVICES_ENV] = ",".join(self._gpu_ids)
        argv, fixed = spec.argv, spec.port
        if spec.port is None:
            # serve() binds it: same port on every start; the first actor picks one free on its node
            env[PORT_ENV] = str(port or free_port(host))
            env[HOST_ENV] = host
        else:
            argv = with_host(spec.argv, host)
            if "--port" in argv or any(arg.startswith("--port=") for arg in argv):
                fixed = port or free_port(host)
                argv = with_port(argv, fixed)
        if ready_delay_s > 0:
            env[READY_DELAY_ENV] = str(ready_delay_s)
        self._process = ManagedProcess(
            dataclasses.replace(spec, argv=argv, env=env, host=host, port=fixed), Path(log_dir), run_id=run_id
        )
        self._process.start()

    def describe(self) -> dict[str, Any]:
        """The server's pid and address, and the actor's own worker pid and node."""
        import ray

        return {
            "pid": self._process.pid,
            "address": self._process.address(),
            "ready_after_s": self._process.ready_after_s,
            "worker_pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "gpu_ids": self._gpu_ids,
        }

    def signal(self, sig: int) -> None:
        """Signal the server's process group (for a node on another machine, where pytest cannot)."""
        self._process.signal(sig)

    def wait_exit(self, timeout_s: float) -> int | None:
        """The server's exit code once it exits, or None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (code := self._process.exit_code()) is None and time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
        return code

    def restart(self, ready_delay_s: float = 0.0) -> dict[str, Any]:
        self._process.restart(ready_delay_s=ready_delay_s)
        return self.describe()

    def stop(self) -> int | None:
        return self._process.stop()


def with_host(argv: tuple[str, ...], host: str) -> tuple[str, ...]:
    """``argv`` with the value of its ``--host`` (``--host X`` or ``--host=X``) replaced by ``host``."""
    return _with_flag(argv, "--host", host)


def with_port(argv: tuple[str, ...], port: int) -> tuple[str, ...]:
    """``argv`` with the value of its ``--port`` replaced by ``port``."""
    return _with_flag(argv, "--port", str(port))


def _with_flag(argv: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    out = list(argv)
    for index, arg in enumerate(out):
        if arg == flag and index + 1 < len(out):
            out[index + 1] = value
        elif arg.startswith(f"{flag}="):
            out[index] = f"{flag}={value}"
    return tuple(out)
