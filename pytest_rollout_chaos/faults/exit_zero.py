"""Process fault: the server exits with status 0 while it is needed (vLLM #48966).

A clean-looking exit defeats ``Restart=on-failure`` and naive "did it crash?" checks. The
server is asked to stop from outside, with no hook in it: ``signal`` goes to the server
process alone, as an orchestrator's stop does, and the server runs its own graceful shutdown
(which stops its own children). SIGINT is the default because more servers exit 0 on it:
aiohttp and vLLM's API server exit 0 on either signal, but ``uvicorn.run`` (NeMo Gym's
servers) re-raises SIGTERM after its shutdown and dies of it, status 143, while it exits 0
on SIGINT. Heal restarts the server on its port.

The facts carry the real exit status. A server that does not exit 0 (killed by the signal
because it has no handler, or failing in its shutdown), or not within ``grace_s`` (then it
is SIGKILLed), makes inject raise ``FaultError`` with the real status: the scenario asked
for a clean exit, and a crash in its place would test something else and might pass.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from signal import SIGINT, SIGKILL, SIGTERM, Signals
from typing import ClassVar, Final, Literal

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults._process_fault import (
    ProcessFault,
    alive_pid,
    exit_status,
    restart_if_down,
    wait_for_exit,
)
from pytest_rollout_chaos.faults.base import FaultContext, param

SIGNALS: Final[Mapping[str, Signals]] = {"SIGINT": SIGINT, "SIGTERM": SIGTERM}


@dataclass(frozen=True, slots=True)
class ExitZero(ProcessFault):
    """The server is asked to shut down and leaves with exit status 0; heal restarts it."""

    kind: ClassVar[str] = "exit_zero"
    terminates_target: ClassVar[bool] = True

    signal: Literal["SIGINT", "SIGTERM"] = field(
        default="SIGINT", metadata=param("the signal that asks the server process to shut down")
    )
    grace_s: float = field(
        default=10.0,
        metadata=param("how long the server may take to shut down before it is killed", minimum=0.1),
    )
    restart_on_heal: bool = field(default=True, metadata=param("bring the server back when healing"))

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        process = ctx.process(self.target)
        pid = alive_pid(process)
        process.expect_exit()
        with contextlib.suppress(ProcessLookupError):  # it exited meanwhile: its status says how
            os.kill(pid, SIGNALS[self.signal])  # the server alone: its shutdown stops its children
        try:
            code = await wait_for_exit(process, timeout_s=self.grace_s)
        except FaultError:
            process.signal(SIGKILL)
            code = await wait_for_exit(process)
            raise FaultError(
                f"exit_zero on {self.target!r}: the server (pid {pid}) still ran {self.grace_s:g}s after "
                f"{self.signal}, so it was killed (exit status {exit_status(code)}); it did not exit 0. "
                f"Give it more time (grace_s), or use kill to crash it"
            ) from None
        status = exit_status(code)
        if status != 0:
            how = f"killed by {_signal_name(-code)}" if code < 0 else "its own exit code"
            raise FaultError(
                f"exit_zero on {self.target!r}: the server (pid {pid}) exited with status {status} ({how}) "
                f"on {self.signal}, not 0: it does not shut down cleanly on {self.signal}. "
                f"Try signal: {'SIGTERM' if self.signal == 'SIGINT' else 'SIGINT'}, or use kill for a crash"
            )
        return {"pid": pid, "signal": self.signal, "code": status}

    async def heal(self, ctx: FaultContext) -> None:
        if self.restart_on_heal:
            await restart_if_down(ctx, self.target)


def _signal_name(number: int) -> str:
    try:
        return Signals(number).name
    except ValueError:
        return f"signal {number}"
