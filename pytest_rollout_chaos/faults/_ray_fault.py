"""The shared shape of Ray faults, and their steps: the Ray-hosted server a fault acts on, or why
there is none.

``RayFault`` is what actor_kill and node_down have in common: a server in a Ray actor as the
target, and what they touched, counted as for a process fault (``_process_fault``): the
requests into the servers they took down, in flight when they came or sent while they held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults._process_fault import alive_pid, touched_servers
from pytest_rollout_chaos.faults.base import Exposure, Family, FaultContext, Need, Targets, Touched
from pytest_rollout_chaos.ray.hosted import RayHostedProcess
from pytest_rollout_chaos.ray.nodes import RayClusterError
from pytest_rollout_chaos.servers.process import ManagedProcess


@dataclass(frozen=True, slots=True)
class RayFault:
    """Base of the Ray faults: the target server, in a Ray actor, and what it touched."""

    kind: ClassVar[str] = ""
    family: ClassVar[Family] = "ray"
    targets: ClassVar[Targets] = "servers"
    needs: ClassVar[tuple[Need, ...]] = (Need.RAY_ACTOR,)

    target: str

    def preflight(self, ctx: FaultContext) -> None:
        alive_pid(hosted(ctx, self.target))

    def touched(self, exposure: Exposure) -> Touched:
        return touched_servers(exposure, (self.target,), until=exposure.healed_at, holds="was down")


def not_hosted_reason(process: ManagedProcess | None) -> str | None:
    """Why a Ray fault cannot act on ``process`` (not in a Ray actor), or None."""
    if isinstance(process, RayHostedProcess):
        return None
    return "the server does not run in a Ray actor in this run (pass --rollout-chaos-ray=local:N)"


def not_removable_reason(process: ManagedProcess | None, *, node: bool) -> str | None:
    """Why a Ray fault (``node``: one that removes the server's node) cannot act on ``process``, or None."""
    reason = not_hosted_reason(process)
    if reason is not None or not node:
        return reason
    assert isinstance(process, RayHostedProcess)
    try:
        process.cluster.node_process(process.slot)
    except RayClusterError as error:
        return str(error)
    return None


def not_on_host_reason(process: ManagedProcess | None) -> str | None:
    """Why a fault between hosts cannot act on ``process`` (not on a host of ``hosts:N``), or None."""
    reason = not_hosted_reason(process)
    if reason is not None:
        return reason.replace("local:N", "hosts:N")
    assert isinstance(process, RayHostedProcess)
    if process.cluster.net is None:
        return (
            f"server {process.name!r} runs on {process.node()} of --rollout-chaos-ray="
            f"{process.cluster.mode.describe()}, not on a host of its own: pass --rollout-chaos-ray=hosts:N "
            "(network namespaces this run can silence and cut apart)"
        )
    return None


def hosted(ctx: FaultContext, target: str) -> RayHostedProcess:
    """The server ``target`` as its Ray actor hosts it; ``FaultError`` when Ray is off."""
    process = ctx.process(target)
    reason = not_hosted_reason(process)
    if reason is not None:
        raise FaultError(f"target {target!r}: {reason}")
    assert isinstance(process, RayHostedProcess)
    return process


def on_same_node(ctx: FaultContext, process: RayHostedProcess) -> list[RayHostedProcess]:
    """Every server placed on ``process``'s node, itself included, each once, by name."""
    found = {
        id(other): other
        for other in ctx.processes.values()
        if isinstance(other, RayHostedProcess) and other.slot.index == process.slot.index
    }
    return sorted(found.values(), key=lambda other: other.name)
