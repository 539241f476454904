"""ServerHost: the Ray actor that runs one server process on its node, and reports where it listens.

The actor owns the server the way the supervisor does in pytest's process: a ``ManagedProcess``
(own process group, log, readiness with a deadline). That child is registered with a reaper
started by the actor's worker, so when Ray kills the actor (``ray.kill``, a node lost, the memory
monitor) the server goes with it, as a server a trainer's actor spawned does. The port is fixed
at creation, so a new actor made with the same arguments brings the server back where the
proxies point. A server that needs GPUs (``ServerSpec.gpus``) gets the ones Ray assigned the
actor as its ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from pytest_rollout_chaos.servers.process import PORT_ENV, READY_DELAY_ENV, ManagedProcess, ServerSpec

WAIT_POLL_S = 0.05
CUDA_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"


class ServerHost:
    """One server in one actor; every method answers within its own bounded wait."""

    def __init__(
        self, spec: ServerSpec, log_dir: str, run_id: str, port: int, ready_delay_s: float = 0.0
    ) -> None:
        env = {**spec.env}
        self._gpu_ids: list[str] = []
        if spec.gpus > 0:  # the devices Ray assigned this actor, and only those
            import ray

            self._gpu_ids = [str(gpu) for gpu in ray.get_gpu_ids()]
            env[CUDA_DEVICES_ENV] = ",".join(self._gpu_ids)
        if spec.port is None:
            env[PORT_ENV] = str(port)  # serve() binds it: same port on every start
        if ready_delay_s > 0:
            env[READY_DELAY_ENV] = str(ready_delay_s)
        self._process = ManagedProcess(dataclasses.replace(spec, env=env), Path(log_dir), run_id=run_id)
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
