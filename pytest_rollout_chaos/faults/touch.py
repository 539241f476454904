"""Counting what a fault touched, from the History: the helpers ``Fault.touched`` is written with.

The fault layer records every request on every link under the upstream server's source
(``invoke``, then ``ok``/``fail``, or ``info`` when the connection was cut), with ``link`` and
``server`` in its data; each rule it fires is a ``hook`` event naming the rule. Pairing each
``invoke`` with its outcome gives a span, and a fault touched a request when the request's span
overlaps the time the fault was on (begun before the heal, not ended before the inject): a
request it slowed, held, cut or refused counts, one that ended before it or began after it does
not. Pure functions of plain values, so faults, the scenario engine and the Python API count alike.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from pytest_rollout_chaos.collector import client_record
from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.servers.links import link_server


@dataclass(frozen=True, slots=True)
class Span:
    """One request: when it began, and when and how it ended (``None`` while still open)."""

    began: float
    ended: float | None = None
    outcome: str | None = None

    def overlaps(self, start: float, end: float) -> bool:
        return self.began <= end and (self.ended is None or self.ended >= start)


def spans(events: Sequence[Event], key_of: Callable[[Event], object]) -> dict[object, Span]:
    """Pair each ``invoke`` with its outcome by ``key_of`` (events it maps to None are skipped)."""
    found: dict[object, Span] = {}
    for event in events:
        key = None if event.op == "hook" else key_of(event)
        if key is None:
            continue
        if event.kind == "invoke":
            found[key] = Span(event.t)
        elif key in found:
            found[key] = Span(found[key].began, event.t, event.kind)
    return found


def layer_request(event: Event) -> str | None:
    """A request the fault layer recorded, by its id."""
    return event.request_id if "link" in event.data else None


def rule_hits(events: Sequence[Event], rule: object) -> int:
    """Requests fault-layer rule ``rule`` hit (its ``hook`` events), less those whose answer it
    rewrote in nothing (``changed: 0``: no logprobs, no prompt id to drift, a body it skipped)."""
    return sum(
        1
        for event in events
        if event.op == "hook" and event.data.get("rule") == rule and event.data.get("changed") != 0
    )


def requests_on_link(events: Sequence[Event], link: str, start: float, end: float) -> int:
    """Requests the layer saw on ``link`` that overlapped ``[start, end]``."""
    found = spans(events, lambda event: layer_request(event) if event.data.get("link") == link else None)
    return sum(1 for span in found.values() if span.overlaps(start, end))


def requests_into(events: Sequence[Event], servers: Collection[str], start: float, end: float) -> int:
    """Requests the layer saw on any link into one of ``servers`` that overlapped ``[start, end]``.

    The layer is a process of its own in front of the server, so it records a request also
    while the server is dead or frozen: a refused or cut request is one the collection meant for
    it. ``servers`` are link-level names (``policy``, ``model``, ``resources``, an agent instance).
    """
    found = spans(events, lambda event: layer_request(event) if event.data.get("server") in servers else None)
    return sum(1 for span in found.values() if span.overlaps(start, end))


def client_failures(events: Sequence[Event], link: str, start: float, end: float) -> int:
    """Requests of the client end of ``link``, open during ``[start, end]``, that ended badly.

    Their outcome may come after the heal: a client gives up on its own deadline, or when the
    collection is cancelled. The collector's are in its own records: the Gym client's of each
    row's ``/run``, and those of a collector's own loop of each request on ``link``
    (``collector.client_record``).
    """
    client = link.partition("->")[0]

    def client_request(event: Event) -> object:
        if client == "collector":
            if event.source != client_record.SOURCE:
                return None
            if event.op == client_record.OP:
                return event.request_id if event.data.get(client_record.VIA) == link else None
            return ("row", event.data.get("row")) if event.op == "run" else None
        into = event.data.get("link")
        return event.request_id if into is not None and link_server(str(into))[1] == client else None

    found = spans(events, client_request)
    return sum(1 for span in found.values() if span.outcome in ("fail", "info") and span.overlaps(start, end))


def open_requests(events: Sequence[Event]) -> list[object]:
    """Layer requests with an ``invoke`` and no outcome yet."""
    return [key for key, span in spans(events, layer_request).items() if span.ended is None]
