"""Fault between hosts: the network between two hosts is cut both ways, then healed.

The host of ``target`` and the host of ``peer`` (every other host when no peer is named) of
``--rollout-chaos-ray=hosts:N`` stop hearing each other: whatever one sends the other vanishes,
with no refusal and no reset, so connections between them hang, as across a partitioned switch.
pytest, the head and the hosts on neither side still reach both. The servers call each other
through the proxies beside pytest, so the cut also covers those calls: on each side, what is sent
to the proxies of the other side's servers, and what they send back, is dropped too (by their
ports; ``ray.netns``). Heal removes the cut; connections that did not give up meanwhile go on.

It touched the requests on the links across the cut (a client on one side, its server on the
other) and the requests into the servers whose calls cross it, that were in flight when it came
or sent while it held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults._ray_fault import hosted, not_on_host_reason
from pytest_rollout_chaos.faults.base import Exposure, Family, FaultContext, Need, Targets, Touched, param
from pytest_rollout_chaos.faults.touch import requests_into, requests_on_link
from pytest_rollout_chaos.ray.hosted import RayHostedProcess, on_head_node
from pytest_rollout_chaos.ray.nodes import NodeSlot, RayClusterError
from pytest_rollout_chaos.servers.links import link_server
from pytest_rollout_chaos.servers.policy.replicas import replica_of


@dataclass(frozen=True, slots=True)
class Partition:
    """Cut the host of ``target`` from the host of ``peer`` (or from every other host), both ways."""

    kind: ClassVar[str] = "partition"
    family: ClassVar[Family] = "ray"
    targets: ClassVar[Targets] = "servers"
    needs: ClassVar[tuple[Need, ...]] = (Need.HOST,)

    target: str
    peer: str = field(
        default="",
        metadata=param(
            "a server on the other side of the cut (policy: every replica's host); empty: every host but "
            "the target's"
        ),
    )

    def preflight(self, ctx: FaultContext) -> None:
        self._sides(ctx)

    def _sides(self, ctx: FaultContext) -> tuple[RayHostedProcess, list[NodeSlot]]:
        """The target's server and the slots of the hosts on the other side."""
        process = self._on_host(ctx, self.target)
        cluster = process.cluster
        if self.peer:
            peers = [self._on_host(ctx, name) for name in _servers_named(ctx, self.peer)]
            others = sorted(
                {peer.slot for peer in peers if peer.slot.index != process.slot.index}, key=_index
            )
            if not others:
                raise FaultError(
                    f"target {self.target!r} and peer {self.peer!r} all run on host {process.slot.index} "
                    f"({cluster.describe_slot(process.slot)}): there is no network between them to cut"
                )
            return process, others
        others = [slot for slot in cluster.slots if slot.index != process.slot.index]
        if not others:
            raise FaultError(
                f"target {self.target!r}: its host is the only one (--rollout-chaos-ray=hosts:1)"
            )
        return process, others

    @staticmethod
    def _on_host(ctx: FaultContext, name: str) -> RayHostedProcess:
        process = hosted(ctx, name)
        if (reason := not_on_host_reason(process)) is not None:
            raise FaultError(f"target {name!r}: {reason}")
        return process

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        process, others = self._sides(ctx)
        here = process.slot
        hosts = {here.index, *(slot.index for slot in others)}
        ports_to: dict[int, list[int]] = {index: [] for index in hosts}
        crossing, cut_off = [], set()
        for link, proxy in sorted(ctx.links.items()):
            server_host = _host_of(ctx, link_server(link)[0])
            if server_host not in hosts:
                continue
            if ctx.toxiproxy is not None:
                ports_to[server_host].append((await ctx.toxiproxy.proxy(proxy)).listen_port)
            far = {here.index} if server_host != here.index else hosts - {here.index}
            clients = {name for name, host in _clients(ctx, link).items() if host in far}
            if clients:
                crossing.append(link)
                cut_off.update(clients)
        rules = 0
        try:
            for other in others:
                rules += await asyncio.to_thread(process.cluster.cut, here, other, ports_to=ports_to)
        except RayClusterError as error:
            raise FaultError(f"target {self.target!r}: {error}") from None
        return {
            "hosts": [process.cluster.describe_slot(slot) for slot in (here, *others)],
            "links": crossing,
            "cut_off": sorted(cut_off),
            "rules": rules,
        }

    async def heal(self, ctx: FaultContext) -> None:
        try:
            process, others = self._sides(ctx)
        except FaultError:
            return  # inject refused: nothing was cut
        for other in others:
            await asyncio.to_thread(process.cluster.mend, process.slot, other)

    def touched(self, exposure: Exposure) -> Touched:
        links = _names(exposure.facts.get("links"))
        cut_off = _names(exposure.facts.get("cut_off"))
        start, end = exposure.injected_at, exposure.healed_at
        count = sum(requests_on_link(exposure.events, link, start, end) for link in links)
        count += requests_into(exposure.events, cut_off, start, end)
        return Touched(
            count,
            "requests on the links across the cut, and into the servers whose calls cross it, "
            "in flight or sent while it held",
        )


def _servers_named(ctx: FaultContext, name: str) -> list[str]:
    """``name`` itself, or every policy replica for ``policy`` where the replicas go by ``policy[i]``."""
    if name in ctx.processes:
        return [name]
    found = [server for server in ctx.processes if replica_of(server)[0] == name and server != name]
    return found or [name]  # an unknown name: ``hosted`` says which are known


def _index(slot: NodeSlot) -> int:
    return slot.index


def _host_of(ctx: FaultContext, name: str) -> int | None:
    process = ctx.processes.get(name)
    return process.slot.index if isinstance(process, RayHostedProcess) else None


def _clients(ctx: FaultContext, link: str) -> dict[str, int]:
    """The servers that call through ``link`` (``agent->model``: every agent), by each name they go
    by (``model`` and ``gym_model``), with their host; the collector's links have none (it runs
    beside pytest)."""
    client = link.partition("->")[0]
    found: dict[str, int] = {}
    for name, process in ctx.processes.items():
        if not isinstance(process, RayHostedProcess):
            continue
        is_client = (
            not on_head_node(process.name) if client == "agent" else ctx.processes.get(client) is process
        )
        if is_client:
            found[name] = process.slot.index
    return found


def _names(value: object) -> tuple[str, ...]:
    return tuple(str(name) for name in value) if isinstance(value, list | tuple) else ()
