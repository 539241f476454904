"""Histories whose events sit at given times, and the ``/run`` requests, faults and collection
timing placed on them: for the invariants that judge when and how a collection ended."""

from __future__ import annotations

import itertools
from dataclasses import replace

from pytest_rollout_chaos.history import Event, EventKind, History
from pytest_rollout_chaos.invariants.base import Observation

LINK = "collector->agent:calculator_agent"
request_ids = itertools.count()


class Recorded(History):
    """A History whose events are placed at given times, as servers' events files place them."""

    def __init__(self) -> None:
        super().__init__(t0=0.0)
        self.written: list[Event] = []

    def events(
        self, *, source: str | None = None, kind: str | None = None, op: str | None = None
    ) -> list[Event]:
        return [
            event
            for event in sorted(self.written, key=lambda event: event.t)
            if (source is None or event.source == source)
            and (kind is None or event.kind == kind)
            and (op is None or event.op == op)
        ]


def at(history: History, t: float, source: str, kind: EventKind, op: str, **data: object) -> None:
    """An event at ``t`` seconds after the History's start (the layer writes its own times)."""
    assert isinstance(history, Recorded)
    request_id = data.pop("request_id", None)
    rid = str(request_id) if request_id else None
    history.written.append(Event(history.t0 + t, source, kind, op, data, rid))


def request(
    history: History, began: float, ended: float | None, *, status: int | None = 200, row: int = 0
) -> None:
    """One ``/run`` as the layer records it: invoke, then an answer (``status``) or a cut (None)."""
    rid = f"r{next(request_ids)}"
    facts = {"link": LINK, "server": "calculator_agent", "row": row, "request_id": rid}
    at(history, began, "agent", "invoke", "POST /run", **facts)
    if ended is not None:
        outcome = {"status": status} if status is not None else {"error": "the client closed the connection"}
        kind: EventKind = "ok" if status is not None else "info"
        at(history, ended, "agent", kind, "POST /run", **facts, **outcome)


def timed(observation: Observation, *, ended: float, timeout_s: float = 5.0) -> Observation:
    """The collection started at the History's start and ended ``ended`` seconds later."""
    t0 = observation.history.t0
    return replace(observation, started_at=t0, elapsed_s=ended, request_timeout_s=timeout_s)


def fault(history: History, t: float, name: str, **data: object) -> None:
    at(history, t, "fault", "info", "inject", fault=name, target="agent", **data)
