"""Shared steps of the Ray faults: the Ray-hosted server a fault acts on, or why there is none."""

from __future__ import annotations

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.ray.cluster import RayClusterError
from pytest_rollout_chaos.ray.hosted import RayHostedProcess
from pytest_rollout_chaos.servers.process import ManagedProcess


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
