"""Did every fault act? A fault that fired but touched nothing proves nothing, so it fails the run.

Counted from the History once the run is over, for each injected fault:

- a fault-layer rule (``LayerFault``): the requests it hit, its ``hook`` events;
- a network fault on a link: the requests the fault layer saw on that link while the fault was
  on (started before the heal, not finished before the inject), so a request it slowed, held or
  cut counts. Toxics act on the answer (Toxiproxy's downstream), so such a request still reaches
  the layer. ``down`` refuses new connections before the layer, where no recorder sees them, so
  it counts the requests it cut and, as seen from the link's client, the requests the client
  failed meanwhile (an agent's ``/run`` while its resources link is down);
- ``short_results``: the Gym calls it shortened (the client's ``short_results`` events);
- ``cancel``: the collection it cancelled (none when the collection had already ended);
- a process fault: one touch, its process. Its inject refuses a target that is already gone.

Whatever the count, a fault injected after the collection ended touched nothing of it. A step
may say how many touches it expects (``expect_hits``; 0 for a fault meant to hit nothing).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from pytest_rollout_chaos.engine.schedule import Applied
from pytest_rollout_chaos.faults._layer_fault import LayerFault
from pytest_rollout_chaos.faults._toxic_fault import ToxicFault
from pytest_rollout_chaos.faults.apply import describe
from pytest_rollout_chaos.faults.cancel import Cancel
from pytest_rollout_chaos.faults.down import Down
from pytest_rollout_chaos.faults.short_results import ShortResults
from pytest_rollout_chaos.history import Event, History
from pytest_rollout_chaos.servers.links import link_server

SETTLE_POLL_S: Final = 0.02


async def settle(history: History, *, timeout_s: float) -> int:
    """Wait until every request the fault layer saw has its outcome recorded, or ``timeout_s``.

    A request the client gave up on is recorded when the layer notices the closed connection,
    a moment after; counting before that would miss what a fault cut. Returns the requests
    still open (a server that keeps retrying upstream may hold some past the deadline).
    """
    deadline = time.monotonic() + timeout_s
    while (left := len(_open_requests(history.events()))) and time.monotonic() < deadline:
        await asyncio.sleep(SETTLE_POLL_S)
    return left


@dataclass(frozen=True, slots=True)
class Touches:
    """How much one injected fault touched, and what was counted."""

    applied: Applied
    count: int
    counted: str  # "requests hit by its rule", ...

    def describe(self) -> str:
        return f"{describe(self.applied.fault)}: {self.count} {self.counted}"


def count_touches(applied: Sequence[Applied], history: History, *, ended_at: float) -> list[Touches]:
    """What each successfully injected fault touched; a fault injected after ``ended_at`` touched 0."""
    events = history.events()
    found = []
    for entry in applied:
        if not entry.injected:
            continue  # its inject failed: a fault error already fails the run
        count, counted = _touched(entry, events, ended_at)
        found.append(Touches(entry, 0 if entry.injected_at > ended_at else count, counted))
    return found


def problems(touches: Sequence[Touches], *, started_at: float, ended_at: float, t0: float) -> list[str]:
    """One line per step whose faults did not act as it said, with what they matched and when.

    A step on ``agent`` puts one fault on each agent instance, and a row lives on one of them,
    so a step is judged by what its faults touched together.
    """
    steps: dict[int, list[Touches]] = {}
    for touch in touches:
        steps.setdefault(id(touch.applied.step), []).append(touch)
    ran = f"the collection ran from t={started_at - t0:.2f}s to t={ended_at - t0:.2f}s"
    lines = []
    for group in steps.values():
        step, first = group[0].applied.step, group[0].applied
        where = f"line {step.line}: {step.describe()}"
        late = [touch.applied for touch in group if touch.applied.injected_at > ended_at]
        if late:
            lines.append(f"{where} was injected at t={late[0].injected_at - t0:.2f}s, after the end: {ran}")
            continue
        count = sum(touch.count for touch in group)
        wanted = step.expect_hits
        if (wanted is None and count > 0) or count == wanted:
            continue
        expected = "at least 1" if wanted is None else str(wanted)
        matched = first.facts.get("match")
        lines.append(
            f"{where} was injected at t={first.injected_at - t0:.2f}s and touched {count} "
            f"{group[0].counted} (expect_hits: {expected})"
            + (f"; it matched {matched}" if matched else "")
            + f"; {ran}"
        )
    return lines


def _touched(entry: Applied, events: Sequence[Event], ended_at: float) -> tuple[int, str]:
    fault = entry.fault
    if isinstance(fault, LayerFault):
        rule = entry.facts.get("rule")
        hits = sum(1 for event in events if event.op == "hook" and event.data.get("rule") == rule)
        return hits, "requests hit by its rule"
    if isinstance(fault, ToxicFault | Down):
        healed_at = entry.healed_at if entry.healed_at is not None else ended_at
        count = _requests_on_link(events, fault.target, entry.injected_at, healed_at)
        if isinstance(fault, Down):
            count += _client_failures(events, fault.target, entry.injected_at, healed_at)
            return count, f"requests on {fault.target} cut, or failed by its client, while it was down"
        return count, f"requests on {fault.target} while it was on"
    if isinstance(fault, Cancel):
        return (1 if entry.facts.get("cancelled") else 0), "collections cancelled"
    if isinstance(fault, ShortResults):
        shortened = sum(
            1
            for event in events
            if event.source == "collector" and event.op == "short_results" and event.t >= entry.injected_at
        )
        return shortened, "Gym calls shortened"
    return 1, "process"


@dataclass(frozen=True, slots=True)
class _Span:
    """One request: when it began, and when and how it ended (``None`` while still open)."""

    began: float
    ended: float | None = None
    outcome: str | None = None

    def overlaps(self, start: float, end: float) -> bool:
        return self.began <= end and (self.ended is None or self.ended >= start)


def _spans(events: Sequence[Event], key_of: Callable[[Event], object]) -> dict[object, _Span]:
    """Pair each ``invoke`` with its outcome by ``key_of`` (events it maps to None are skipped)."""
    spans: dict[object, _Span] = {}
    for event in events:
        key = None if event.op == "hook" else key_of(event)
        if key is None:
            continue
        if event.kind == "invoke":
            spans[key] = _Span(event.t)
        elif key in spans:
            spans[key] = _Span(spans[key].began, event.t, event.kind)
    return spans


def _layer_request(event: Event) -> str | None:
    """A request the fault layer recorded, by its id."""
    return event.request_id if "link" in event.data else None


def _requests_on_link(events: Sequence[Event], link: str, start: float, end: float) -> int:
    """Requests the layer saw on ``link`` that overlapped ``[start, end]``."""
    spans = _spans(events, lambda event: _layer_request(event) if event.data.get("link") == link else None)
    return sum(1 for span in spans.values() if span.overlaps(start, end))


def _client_failures(events: Sequence[Event], link: str, start: float, end: float) -> int:
    """Requests of the client end of ``link``, open during ``[start, end]``, that ended badly.

    Their outcome may come after the heal: a client gives up on its own deadline, or when the
    collection is cancelled.
    """
    client = link.partition("->")[0]

    def client_request(event: Event) -> object:
        if client == "collector":  # the Gym client's own record of each row's /run
            return (
                ("row", event.data.get("row")) if event.source == "collector" and event.op == "run" else None
            )
        into = event.data.get("link")
        return event.request_id if into is not None and link_server(str(into))[1] == client else None

    spans = _spans(events, client_request)
    return sum(1 for span in spans.values() if span.outcome in ("fail", "info") and span.overlaps(start, end))


def _open_requests(events: Sequence[Event]) -> list[object]:
    """Layer requests with an ``invoke`` and no outcome yet."""
    return [key for key, span in _spans(events, _layer_request).items() if span.ended is None]
