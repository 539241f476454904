"""Fault between hosts: the host of a server is lost, as a machine that loses power mid-batch.

The host (``--rollout-chaos-ray=hosts:N``: a network namespace, a PID namespace and a ``/tmp`` of
its own) first goes silent: nothing sent to it is answered and nothing it says as it dies leaves it
(no FIN, no RST), so its peers' connections, open or new, hang as to a machine that is gone; then
every process of it is killed at once: its Ray node, every actor there and every server they host.
The driver learns it the way a trainer does: its calls hang, and Ray declares the node dead after
its missed health checks; inject waits for that and reports how long it took. Heal lets the host be
heard again and boots it again (an empty ``/tmp``, a new Ray node with the same placement resource),
and starts its servers again on their ports. What the host's servers wrote until the fault is copied
here first, as a log shipper would have sent it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults._process_fault import alive_pid, restart_if_down, touched_servers
from pytest_rollout_chaos.faults._ray_fault import RayFault, hosted, not_on_host_reason, on_same_node
from pytest_rollout_chaos.faults.base import Exposure, FaultContext, Need, Touched
from pytest_rollout_chaos.ray.nodes import RayClusterError


@dataclass(frozen=True, slots=True)
class HostLost(RayFault):
    """Silence the server's host and kill everything on it; heal lets it be heard and boots it."""

    kind: ClassVar[str] = "host_lost"
    needs: ClassVar[tuple[Need, ...]] = (Need.HOST,)
    terminates_target: ClassVar[bool] = True

    def preflight(self, ctx: FaultContext) -> None:
        process = hosted(ctx, self.target)
        if (reason := not_on_host_reason(process)) is not None:
            raise FaultError(f"target {self.target!r}: {reason}")
        alive_pid(process)

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        self.preflight(ctx)
        process = hosted(ctx, self.target)
        lost = on_same_node(ctx, process)
        for server in lost:
            server.expect_exit()
        cluster, where = process.cluster, process.where()
        try:
            facts: dict[str, object] = dict(await asyncio.to_thread(cluster.lose_host, process.slot))
        except RayClusterError as error:
            raise FaultError(f"target {self.target!r}: {error}") from None
        for server in lost:
            server.lost()
        facts.update(where=where, servers=[server.name for server in lost])
        facts["declared_dead_s"] = round(
            await asyncio.to_thread(cluster.wait_node_dead, str(facts["node_id"])), 3
        )
        return facts

    async def heal(self, ctx: FaultContext) -> None:
        process = hosted(ctx, self.target)
        if not_on_host_reason(process) is not None:
            return  # inject refused: nothing was lost
        await asyncio.to_thread(process.cluster.restore_host, process.slot)
        for server in on_same_node(ctx, process):
            await restart_if_down(ctx, server.name)

    def touched(self, exposure: Exposure) -> Touched:
        lost = exposure.facts.get("servers")
        servers = tuple(str(name) for name in lost) if isinstance(lost, list | tuple) else (self.target,)
        what = f"the servers of its host ({', '.join(servers)})"
        return touched_servers(exposure, servers, until=exposure.healed_at, holds="was lost", what=what)
