"""Process fault: the kernel's OOM killer kills the server, with no help from the server.

The server process is moved into a new memory cgroup limited to 0 bytes. The memory it
already holds stays charged where it was (the kernel does not move charges with a process,
see ``_cgroup``), so the cage is over its limit at the first new page the server touches.
The fault supplies that page at once, from outside (``_cgroup.copy_on_write``), and the
kernel's OOM killer kills the server, as it kills a server that outgrows its container's
memory limit. The server is caged alone, so that the kernel's victim is the server and not a
larger child; what is left of its process group is SIGKILLed afterwards, as an OOM-killed
container's processes all end, and the cage is removed, on every path.

The facts say truthfully what happened: ``{"oom": "kernel"}`` only when the cage's own
``oom_kill`` counter rose and the server died of SIGKILL; ``"unconfirmed"`` when it died in
the cage but the counter or its exit does not show the kernel's hand; ``"sigkill"`` with a
``reason`` when this machine does not permit the kernel route (no memory cgroup, no write
access to ``/proc/<pid>/mem``) or the kernel did not kill in time: the fault then sends
SIGKILL itself, exit status 137, as an OOM kill looks from outside. Heal restarts the server.

A server in a Ray actor (``--rollout-chaos-ray``) is killed the way Ray's memory monitor kills:
when its node passes ``memory_usage_threshold`` the raylet SIGKILLs a worker, here the actor's,
and the server goes with it (``{"oom": "ray_memory_monitor"}``). The actor has no restarts
(``max_restarts=0``, see ``ray.hosted``), so it stays dead until heal, as after the kernel's
kill. The kill is sent by the fault: making the real monitor fire would mean filling this
machine's memory to 95%.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults._cgroup import (
    CgroupUnavailable,
    MemoryCage,
    copy_on_write,
    create_cage,
    resident_bytes,
)
from pytest_rollout_chaos.faults._process_fault import (
    ProcessFault,
    alive_pid,
    exit_status,
    on_this_machine,
    restart_if_down,
    wait_for_exit,
    wait_for_group_exit,
)
from pytest_rollout_chaos.faults.base import FaultContext, Need, fault_tag, param
from pytest_rollout_chaos.ray.hosted import RayHostedProcess
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.procfs import process_state

_logger = logging.getLogger(__name__)
_MIB = 1 << 20
CAGE_LIMIT_BYTES = 0
COPY_DEADLINE_S = 10.0  # the kernel acts at the first copied page; this bounds a refusing machine
COPY_MAX_PAGES = 16384
DEATH_WAIT_S = 5.0  # from the kernel's kill to the exit the supervisor sees


@dataclass(frozen=True, slots=True)
class Oom(ProcessFault):
    """A real kernel OOM kill through a 0-byte memory cgroup, or SIGKILL where not permitted."""

    kind: ClassVar[str] = "oom"
    needs: ClassVar[tuple[Need, ...]] = (Need.PROCESS, Need.HERE)  # it reads /proc
    terminates_target: ClassVar[bool] = True

    restart_on_heal: bool = field(default=True, metadata=param("bring the server back when healing"))

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        process = ctx.process(self.target)
        pid = alive_pid(process)
        on_this_machine(process, self.kind)
        resident = resident_bytes(pid)
        process.expect_exit()
        if isinstance(process, RayHostedProcess):
            return await _finish(process, pid, await _ray_memory_monitor(process, pid), resident)
        try:
            cage = await asyncio.to_thread(create_cage, pid, fault_tag(self), CAGE_LIMIT_BYTES)
        except CgroupUnavailable as why:
            facts = await _sigkill(process, pid, f"no memory cgroup: {why}")
            return await _finish(process, pid, facts, resident)
        try:
            facts = await _kill_in_cage(process, pid, cage)
        except BaseException:
            await _release(process, cage, self.target, failing=True)
            raise
        await _release(process, cage, self.target, failing=False)
        return await _finish(process, pid, facts, resident)

    async def heal(self, ctx: FaultContext) -> None:
        if self.restart_on_heal:
            await restart_if_down(ctx, self.target)


async def _kill_in_cage(process: ManagedProcess, pid: int, cage: MemoryCage) -> dict[str, object]:
    before = cage.oom_kills()
    try:
        # The server alone: in a cage with no memory the OOM killer picks the largest process
        # (oom_score_adj weighs nothing against a 0-byte limit), which may be a child of it.
        cage.move(pid)
    except OSError as error:
        return await _sigkill(process, pid, f"cannot move the server into {cage.path}: {error}")

    def done() -> bool:
        kills = cage.oom_kills()
        return process_state(pid) in (None, "Z", "X") or (
            before is not None and kills is not None and kills > before
        )

    try:
        copied = await asyncio.to_thread(
            copy_on_write,
            pid,
            done=done,
            max_pages=COPY_MAX_PAGES,
            deadline=time.monotonic() + COPY_DEADLINE_S,
        )
    except CgroupUnavailable as why:
        return await _sigkill(process, pid, f"cannot make the server take new memory: {why}")
    kills = cage.oom_kills()
    untouched = before is not None and kills is not None and kills == before
    code: int | None = None
    if not untouched or process_state(pid) in (None, "Z", "X"):  # else no kill is on its way
        with contextlib.suppress(FaultError):
            code = await wait_for_exit(process, timeout_s=DEATH_WAIT_S)
    if code is None:
        refused = f"; a write was refused: {copied.refused}" if copied.refused else ""
        return await _sigkill(
            process,
            pid,
            f"the server survived {copied.pages} page writes under a {CAGE_LIMIT_BYTES}-byte limit in "
            f"{cage.path} (its oom_kill counter went {before} -> {cage.oom_kills()}){refused}",
        )
    after = cage.oom_kills()
    kernel = before is not None and after is not None and after > before and code == -signal.SIGKILL
    return {
        "oom": "kernel" if kernel else "unconfirmed",
        "cgroup": f"v{cage.version}",
        "oom_kills": after - before if before is not None and after is not None else None,
        "limit_bytes": cage.limit_bytes(),
        "pages_written": copied.pages,
        "pid": pid,
        "code": exit_status(code),
    }


async def _release(process: ManagedProcess, cage: MemoryCage, target: str, *, failing: bool) -> None:
    """SIGKILL what the OOM killer left of the group, then remove the cage (bounded wait)."""
    process.signal(signal.SIGKILL)
    try:
        await asyncio.to_thread(cage.remove)
    except CgroupUnavailable as error:
        if not failing:  # nothing else failed: the leftover cgroup is this fault's failure
            raise FaultError(f"oom on {target!r}: {error}") from None
        _logger.warning("oom on %r: %s", target, error)


async def _finish(
    process: ManagedProcess, pid: int, facts: dict[str, object], resident: int | None
) -> dict[str, object]:
    """Make sure nothing of the server's process group runs on; add what the facts lack."""
    process.signal(signal.SIGKILL)
    left = await wait_for_group_exit(pid)
    if left:
        facts["group_left"] = left
    if resident is not None:
        facts["resident_mib"] = round(resident / _MIB, 1)
    return facts


async def _ray_memory_monitor(process: RayHostedProcess, pid: int) -> dict[str, object]:
    """SIGKILL the actor's worker, as the raylet does to the worker its memory monitor picks."""
    worker_pid = process.worker_pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker_pid, signal.SIGKILL)
    code = await wait_for_exit(process)
    return {
        "oom": "ray_memory_monitor",
        "where": process.where(),
        "worker_pid": worker_pid,
        "pid": pid,
        "code": exit_status(code),
    }


async def _sigkill(process: ManagedProcess, pid: int, reason: str) -> dict[str, object]:
    process.signal(signal.SIGKILL)
    code = await wait_for_exit(process)
    return {"oom": "sigkill", "reason": reason, "pid": pid, "code": exit_status(code)}
