"""The shared shape of process faults, and their steps: wait for an exit, bring a server back.

``ProcessFault`` is what kill, oom, freeze, exit_zero and restart have in common: a server this
run started as the target, and what they touched. A process fault acted only when it hit
something the collection used: the requests into its server (on every link leading there, as
the fault layer recorded them) that were in flight when it came or were sent while it held. A
refused or cut request counts (the collection tried to use the server), a server nobody called
does not. A server killed by a fault is restarted on heal on the same port
(``ManagedProcess.restart``), so proxies pointing at it keep working and later tests have it
back; the restart is recorded as ``fault``/``info``/``restart``.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.base import Exposure, Family, FaultContext, Need, Targets, Touched
from pytest_rollout_chaos.faults.touch import requests_into
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.procfs import alive, group_pids

EXIT_WAIT_S = 10.0


@dataclass(frozen=True, slots=True)
class ProcessFault:
    """Base of the process faults: the target server, checked alive first, and what it touched."""

    kind: ClassVar[str] = ""
    family: ClassVar[Family] = "process"
    targets: ClassVar[Targets] = "servers"
    needs: ClassVar[tuple[Need, ...]] = (Need.PROCESS,)
    holds: ClassVar[str] = "was down"  # how its target is while the fault holds, for messages

    target: str

    def preflight(self, ctx: FaultContext) -> None:
        alive_pid(ctx.process(self.target))

    def touched(self, exposure: Exposure) -> Touched:
        return touched_servers(exposure, (self.target,), until=exposure.healed_at, holds=self.holds)


def touched_servers(
    exposure: Exposure, servers: tuple[str, ...], *, until: float, holds: str, what: str = "its server"
) -> Touched:
    """The requests into ``servers`` in flight at the inject or sent before ``until``."""
    count = requests_into(exposure.events, servers, exposure.injected_at, until)
    return Touched(count, f"requests into {what}, in flight or sent while it {holds}")


async def wait_for_exit(process: ManagedProcess, *, timeout_s: float = EXIT_WAIT_S) -> int:
    """The exit code once the server has exited; ``FaultError`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (code := process.exit_code()) is None:
        if time.monotonic() >= deadline:
            raise FaultError(f"server {process.name!r} (pid {process.pid}) still runs after {timeout_s:.1f}s")
        await asyncio.sleep(0.02)
    return code


async def wait_for_group_exit(pgid: int, *, timeout_s: float = EXIT_WAIT_S) -> list[int]:
    """The members of process group ``pgid`` still alive after ``timeout_s``; ``[]`` once all are gone."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [pid for pid in group_pids(pgid) if alive(pid)]
        if not left or time.monotonic() >= deadline:
            return left
        await asyncio.sleep(0.02)


def exit_status(code: int) -> int:
    """Popen's ``-N`` for "killed by signal N" as the shell's ``128 + N`` (SIGKILL -> 137)."""
    return 128 - code if code < 0 else code


async def restart_if_down(ctx: FaultContext, target: str) -> None:
    """Bring ``target`` back on its port unless it runs; record the restart."""
    process = ctx.process(target)
    if process.is_running():
        return
    address = process.address()
    started = time.monotonic()
    await asyncio.to_thread(process.restart)
    ctx.history.append(
        "fault",
        "info",
        "restart",
        {
            "server": target,
            "port": address[1] if address else None,
            "pid": process.pid,
            "took_s": round(time.monotonic() - started, 4),
        },
    )


def on_this_machine(process: ManagedProcess, kind: str) -> None:
    """``FaultError`` for a fault that reads ``/proc`` on a server running on another machine."""
    if not process.here:
        raise FaultError(
            f"{kind}: server {process.name!r} runs on {process.node()}, on another machine; {kind} "
            "reads its processes from /proc, which shows this machine's only (kill, restart, "
            "actor_kill reach it)"
        )


def alive_pid(process: ManagedProcess) -> int:
    """The server's pid, or ``FaultError`` when it is not running (nothing to fault)."""
    if not process.is_running():
        raise FaultError(f"server {process.name!r} is not running (exit code {process.exit_code()})")
    return process.pid


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
