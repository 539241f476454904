"""Process fault: SIGKILL the server's whole process group (NeMo RL #2305: an agent dies mid-batch)."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_rollout_chaos.faults._process_fault import (
    ProcessFault,
    alive_pid,
    exit_status,
    restart_if_down,
    wait_for_exit,
)
from pytest_rollout_chaos.faults.base import FaultContext, param


@dataclass(frozen=True, slots=True)
class Kill(ProcessFault):
    """SIGKILL, no warning; heal restarts the server on its port."""

    kind: ClassVar[str] = "kill"
    terminates_target: ClassVar[bool] = True

    restart_on_heal: bool = field(default=True, metadata=param("bring the server back when healing"))

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        process = ctx.process(self.target)
        pid = alive_pid(process)
        process.expect_exit()  # the fault's doing, not a broken environment; still recorded
        process.signal(signal.SIGKILL)
        code = await wait_for_exit(process)
        return {"pid": pid, "signal": int(signal.SIGKILL), "code": exit_status(code)}

    async def heal(self, ctx: FaultContext) -> None:
        if self.restart_on_heal:
            await restart_if_down(ctx, self.target)
