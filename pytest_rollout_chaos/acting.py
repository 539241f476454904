"""Whether a fault can act on a stack, and whether it did: one rule for scenarios and Python tests.

Before a fault is injected, ``cannot_act`` reads what its class needs (``Fault.needs``) and says
why this run lacks it: a process fault on a server this run did not start (an external policy),
a Ray fault on a server not in a Ray actor, or on a node that cannot be removed, a fault between
hosts without ``hosts:N``, a fault that reads ``/proc`` on a server on another machine. What each
server lacks is gathered for every need at once (``lacks``), the facts the fit step
(``engine.fit``) reads too: a scenario then skips with the reason, and ``chaos_faults`` refuses
the inject. The needs every plugin run has (a Toxiproxy link, the fault layer, the Gym client,
the collection) are left to the fault's own preflight, which says what is missing when a
hand-built stack lacks one.

After the collection, ``settle`` waits until the fault layer has recorded the outcome of every
request (what a fault cut is recorded a moment later), ``touched`` counts what one injected fault
touched (its class's ``Fault.touched``), and ``not_acted`` writes the lines that the scenario
engine (``engine.acted``) and the Python API (``injector``) both report (their failure text is
``engine.story.unacted_text``): a chaos test whose fault touched nothing of the collection tested
nothing there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults._ray_fault import not_hosted_reason, not_on_host_reason, not_removable_reason
from pytest_rollout_chaos.faults.base import Exposure, Fault, Need, Touched
from pytest_rollout_chaos.faults.touch import open_requests
from pytest_rollout_chaos.history import Event, History
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.stack import ChaosStack

SETTLE_POLL_S: Final = 0.02
_ON_A_PROCESS: Final = (Need.PROCESS, Need.RAY_ACTOR, Need.RAY_NODE, Need.HOST, Need.HERE)


@dataclass(frozen=True, slots=True)
class Lacks:
    """What each server of a stack lacks of the needs a fault may have (``Need``), with why, by
    scenario server name: facts about the stack, gathered before any fault is named."""

    by_server: Mapping[str, Mapping[Need, str]]
    elsewhere: Mapping[Need, str]  # what a name no process of this run answers to lacks

    def why(self, servers: Iterable[str], needs: Collection[Need]) -> str | None:
        """Why one of ``servers`` cannot meet ``needs``: the first need the first of them lacks."""
        for server in servers:
            lacked = self.by_server.get(server, self.elsewhere)
            for need in needs:
                if need in lacked:
                    return lacked[need]
        return None


def lacks(stack: ChaosStack) -> Lacks:
    """What each server of ``stack`` lacks, for every need."""
    servers, unmanaged = stack.servers(), stack.unmanaged()
    return Lacks(
        {name: _lacked(servers.get(name), unmanaged.get(name)) for name in {*servers, *unmanaged}},
        _lacked(None, None),
    )


def cannot_act(stack: ChaosStack, kind: str, target: str) -> str | None:
    """Why a ``kind`` fault on ``target`` (each server it stands for) cannot act on ``stack``, or None."""
    needs = registry.fault_class(kind).needs
    try:
        names = stack.expand_target(target)
    except ValueError as error:  # ``policy[i]`` beyond the replicas this stack runs
        return str(error)
    return lacks(stack).why(names, needs)


def _lacked(process: ManagedProcess | None, unmanaged: str | None) -> dict[Need, str]:
    return {need: why for need in Need if (why := _lacks(need, process, unmanaged)) is not None}


def _lacks(need: Need, process: ManagedProcess | None, unmanaged: str | None) -> str | None:
    if need in _ON_A_PROCESS and unmanaged is not None:
        return unmanaged
    if need is Need.RAY_ACTOR:
        return not_hosted_reason(process)
    if need is Need.RAY_NODE:
        return not_removable_reason(process, node=True)
    if need is Need.HOST:
        return not_on_host_reason(process)
    if need is Need.HERE and process is not None and not process.here:
        return (
            f"server {process.name!r} runs on {process.node()}, on another machine: this fault reads its "
            "processes from /proc, which shows pytest's machine only"
        )
    return None


def wait_settled(history: History, *, timeout_s: float) -> int:
    """Wait until every request the fault layer saw has its outcome recorded, or ``timeout_s``.

    A request the client gave up on is recorded when the layer notices the closed connection,
    a moment after; counting before that would miss what a fault cut. Returns the requests
    still open (a server that keeps retrying upstream may hold some past the deadline).
    """
    deadline = time.monotonic() + timeout_s
    while (left := len(open_requests(history.events()))) and time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_S)
    return left


async def settle(history: History, *, timeout_s: float) -> int:
    """``wait_settled`` for a caller inside an event loop."""
    return await asyncio.to_thread(wait_settled, history, timeout_s=timeout_s)


def touched(
    fault: Fault,
    events: Sequence[Event],
    *,
    injected_at: float,
    returned_at: float | None,
    healed_at: float | None,
    facts: Mapping[str, object],
    ended_at: float,
) -> Touched:
    """What ``fault`` touched: one still on at ``ended_at`` counts to then, one injected after it 0."""
    exposure = Exposure(
        injected_at=injected_at,
        returned_at=returned_at if returned_at is not None else injected_at,
        healed_at=healed_at if healed_at is not None else ended_at,
        facts=facts,
        events=events,
    )
    found = fault.touched(exposure)
    return found if injected_at <= ended_at else Touched(0, found.counted)


def acted_as_wanted(count: int, wanted: int | None) -> bool:
    """``expect_hits``: None wants at least one touch, a number exactly that many."""
    return count > 0 if wanted is None else count == wanted


def not_acted(
    where: str,
    *,
    injected_at: float,
    found: Touched,
    wanted: int | None,
    matched: object,
    ran: str,
    t0: float,
) -> str:
    """One line: what a step (or one inject from Python) touched against what it should have."""
    expected = "at least 1" if wanted is None else str(wanted)
    return (
        f"{where} was injected at t={injected_at - t0:.2f}s and touched {found.count} "
        f"{found.counted} (expect_hits: {expected})"
        + (f"; it matched {matched}" if matched else "")
        + f"; {ran}"
    )
