"""Ray fault: ``ray.kill`` the actor hosting a server (NeMo RL's NemoGym or a vLLM worker actor dies).

The server is a child of the actor and dies with it, exit status 137, as processes a dead
actor spawned do. Without ``restart`` the actor stays dead until heal starts a new one (the
hosting actors have ``max_restarts=0``, as NeMo RL's NemoGym since NVIDIA-NeMo/RL#3368).
``restart: true`` is the restartable actor of before that change: at once a new actor takes its
place on the same node, its ``__init__`` run again (which is all Ray's restart of an actor does)
and its server back on the same port; callers in flight saw their connections drop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_rollout_chaos.faults._process_fault import (
    alive_pid,
    exit_status,
    restart_if_down,
    touched_servers,
    wait_for_exit,
)
from pytest_rollout_chaos.faults._ray_fault import RayFault, hosted
from pytest_rollout_chaos.faults.base import Exposure, FaultContext, Touched, param


@dataclass(frozen=True, slots=True)
class ActorKill(RayFault):
    """``ray.kill`` of the server's actor; restarted at once when ``restart``, else by heal."""

    kind: ClassVar[str] = "actor_kill"
    terminates_target: ClassVar[bool] = True

    restart: bool = field(
        default=False,
        metadata=param(
            "restart the actor at once, as Ray restarts one with max_restarts: the server is back on its port"
        ),
    )

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        process = hosted(ctx, self.target)
        pid = alive_pid(process)
        facts: dict[str, object] = {"where": process.where(), "pid": pid}
        facts.update(await asyncio.to_thread(process.kill_actor))
        facts["code"] = exit_status(await wait_for_exit(process))
        if self.restart:
            started = time.monotonic()
            await asyncio.to_thread(process.restart)
            facts.update(restarted_in_s=round(time.monotonic() - started, 3), pid_after=process.pid)
        return facts

    async def heal(self, ctx: FaultContext) -> None:
        await restart_if_down(ctx, self.target)

    def touched(self, exposure: Exposure) -> Touched:
        if not self.restart:
            return RayFault.touched(self, exposure)
        # restarted at once: the server is back when the inject returns
        return touched_servers(exposure, (self.target,), until=exposure.returned_at, holds="restarted")
