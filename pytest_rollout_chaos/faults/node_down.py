"""Ray fault: the node hosting a server leaves the cluster at once (a rollout node lost mid-batch).

Everything of the node is SIGKILLed together, as when its machine loses power: the raylet, its
agents, and every worker on it, so each actor there dies and takes its server along; the facts
name the node, its Ray node id and the servers lost. The GCS then declares the node dead
after its missed health checks, which is when Ray's callers learn of it (``ActorDiedError``);
inject waits for that and reports how long it took. Heal starts a replacement node with the same
placement resource and new actors there, whose servers come back on their ports. Nodes of
``--rollout-chaos-ray=local:N`` other than the head (node 0) can be removed, and any host's of
``hosts:N`` (whose head runs beside pytest): there every process of the host is killed, but the host
stays on the network, so its peers' connections are refused at once (``host_lost`` takes it off).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults._process_fault import (
    alive_pid,
    restart_if_down,
    touched_servers,
    wait_for_exit,
)
from pytest_rollout_chaos.faults._ray_fault import RayFault, hosted, not_removable_reason, on_same_node
from pytest_rollout_chaos.faults.base import Exposure, FaultContext, Need, Touched
from pytest_rollout_chaos.ray.nodes import RayClusterError


@dataclass(frozen=True, slots=True)
class NodeDown(RayFault):
    """Remove the server's node (SIGKILL of all it runs); heal starts a node in its place."""

    kind: ClassVar[str] = "node_down"
    needs: ClassVar[tuple[Need, ...]] = (Need.RAY_NODE,)
    terminates_target: ClassVar[bool] = True

    def preflight(self, ctx: FaultContext) -> None:
        process = hosted(ctx, self.target)
        alive_pid(process)
        if (reason := not_removable_reason(process, node=True)) is not None:
            raise FaultError(f"target {self.target!r}: {reason}")

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        process = hosted(ctx, self.target)
        alive_pid(process)
        lost = on_same_node(ctx, process)
        for server in lost:
            server.expect_exit()
        cluster = process.cluster
        where = process.where()
        try:
            facts: dict[str, object] = dict(await asyncio.to_thread(cluster.remove_node, process.slot))
        except RayClusterError as error:
            raise FaultError(f"target {self.target!r}: {error}") from None
        for server in lost:
            if cluster.net is not None:  # a host's node: everything of the host is dead already
                server.lost()
            else:
                await wait_for_exit(server)
        facts.update(where=where, servers=[server.name for server in lost])
        facts["declared_dead_s"] = round(
            await asyncio.to_thread(cluster.wait_node_dead, str(facts["node_id"])), 3
        )
        return facts

    async def heal(self, ctx: FaultContext) -> None:
        process = hosted(ctx, self.target)
        if not_removable_reason(process, node=True) is not None:
            return  # inject refused: nothing was removed
        await asyncio.to_thread(process.cluster.restore_node, process.slot)
        for server in on_same_node(ctx, process):
            await restart_if_down(ctx, server.name)

    def touched(self, exposure: Exposure) -> Touched:
        lost = exposure.facts.get("servers")
        servers = tuple(str(name) for name in lost) if isinstance(lost, list | tuple) else (self.target,)
        what = f"the servers of its node ({', '.join(servers)})"
        return touched_servers(exposure, servers, until=exposure.healed_at, holds="was down", what=what)
