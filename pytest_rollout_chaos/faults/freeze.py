"""Process fault: SIGSTOP the server's group (alive, port open, no answers); SIGCONT on heal.

This is how a wedged engine looks from outside (vLLM #39863): connections are accepted by the
kernel, nothing is ever answered.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults._process_fault import ProcessFault, alive_pid, on_this_machine
from pytest_rollout_chaos.faults.base import FaultContext, Need
from pytest_rollout_chaos.servers.procfs import group_pids, process_state

STOP_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class Freeze(ProcessFault):
    """Stop every process of the server's group; heal continues them."""

    kind: ClassVar[str] = "freeze"
    needs: ClassVar[tuple[Need, ...]] = (Need.PROCESS, Need.HERE)  # it reads /proc
    holds: ClassVar[str] = "was frozen"

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        process = ctx.process(self.target)
        pid = alive_pid(process)
        on_this_machine(process, self.kind)
        process.signal(signal.SIGSTOP)
        # delivery is asynchronous: report the group as stopped only once the kernel says so
        deadline = time.monotonic() + STOP_WAIT_S
        while True:
            states = [process_state(member) for member in group_pids(pid)]
            stopped = sum(state in ("T", "t") for state in states)
            if stopped == len(states) or time.monotonic() >= deadline:
                return {"pid": pid, "stopped": stopped, "members": len(states)}
            await asyncio.sleep(0.01)

    async def heal(self, ctx: FaultContext) -> None:
        ctx.process(self.target).signal(signal.SIGCONT)  # no-op once it is gone
