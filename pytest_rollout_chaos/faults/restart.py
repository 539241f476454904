"""Process fault: stop the server and start it again on the same port (a rolling restart)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults._process_fault import (
    ProcessFault,
    alive_pid,
    restart_if_down,
    touched_servers,
)
from pytest_rollout_chaos.faults.base import Exposure, FaultContext, Touched


@dataclass(frozen=True, slots=True)
class Restart(ProcessFault):
    """In-flight requests are cut; the server is back on its port when inject returns."""

    kind: ClassVar[str] = "restart"
    holds: ClassVar[str] = "restarted"

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        process = ctx.process(self.target)
        pid_before = alive_pid(process)
        address = process.address()
        started = time.monotonic()
        await asyncio.to_thread(process.restart)
        return {
            "pid_before": pid_before,
            "pid_after": process.pid,
            "port": address[1] if address else None,
            "down_s": round(time.monotonic() - started, 4),
        }

    async def heal(self, ctx: FaultContext) -> None:
        await restart_if_down(ctx, self.target)

    def touched(self, exposure: Exposure) -> Touched:
        # the server is back when the inject returns: later requests are served as usual
        return touched_servers(exposure, (self.target,), until=exposure.returned_at, holds=self.holds)
