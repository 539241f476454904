"""``outage_fails_collection``: a server gone for the rest of the collection fails it, naming the
server and its rows, at the first deadline.

A server that rows were routed to and that went down and stayed down is infrastructure, not a
share of bad trajectories: handing its rows back as aborted placeholders beside the completed
ones passes ``max_aborted_fraction`` whenever it carried few enough of the batch, and trains on a
batch with one task family missing. The collection must raise, its error (with its causes)
naming the server and each row it lost, and by the first request deadline of those rows.

Judged from the records: the supervisor's record of the server's exit (``process``/``exit``) or
the fault layer's record of a connection into it refused (an ``info`` whose error says
``ConnectionRefusedError``); it stayed down when neither a restart (``fault``/``restart``) nor an
answer from it came after, up to the end of the collection. The rows routed to it are the
requested rows whose ``agent_ref.name`` names it; those it lost had no successful ``/run`` (the
layer's record, or the Gym client's) before it went down. The first deadline is the earliest
first ``/run`` of a lost row plus the collector's ``request_timeout_s`` (never before the outage),
and the end may come ``ends_promptly``'s margin after it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

from pytest_rollout_chaos.collector.protocol import row_index
from pytest_rollout_chaos.history import Event, History
from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict
from pytest_rollout_chaos.invariants.ends_promptly import margin_s
from pytest_rollout_chaos.invariants.rules import chain
from pytest_rollout_chaos.invariants.sends import RUN_OP, spans

REFUSED: Final = "ConnectionRefusedError"


@dataclass(frozen=True, slots=True)
class Outage:
    """A server that went down at ``began`` and was not back before the collection ended."""

    server: str
    began: float
    sign: Event  # the exit or the refused connection that began it
    routed: tuple[int, ...]  # the rows routed to it
    lost: tuple[int, ...]  # those with no successful /run before it went down


class OutageFailsCollection:
    name: ClassVar[str] = "outage_fails_collection"
    # What it judges, the collector's answer to a server's exit, needs that exit to reach the
    # collector: the engine skips a scenario that kills a server the collector only meets behind a
    # relay that hides it (NeMo Gym's legacy_agent retries a dead agent without limit).
    judges_exits: ClassVar[bool] = True

    def check(self, observation: Observation) -> Verdict:
        started, ended = observation.started_at, observation.ended_at
        if started is None or ended is None:
            return verdict(self.name, Status.UNKNOWN, "when the collection started and ended is unknown")
        history = observation.history
        outages = find_outages(history, routes(observation), started=started, ended=ended)
        lost = [outage for outage in outages if outage.lost]
        if not lost:
            if outages:
                names = ", ".join(repr(outage.server) for outage in outages)
                return not_judged(
                    self.name, f"{names} went down for good only after every row routed there had its result"
                )
            return not_judged(
                self.name,
                "no server a row was routed to went down and stayed down during the collection "
                "(no exit or refused connection without a restart or an answer after it)",
            )
        failures = [text for outage in lost if (text := _judge(observation, outage)) is not None]
        t0 = history.t0
        evidence = [f"{outage.server} went down: {outage.sign.describe(t0)}" for outage in lost]
        evidence += [f"rows routed to {outage.server} and lost: {list(outage.lost)}" for outage in lost]
        if failures:
            return verdict(
                self.name,
                Status.FAIL,
                story(
                    observation,
                    what="; ".join(failures),
                    expected=(
                        "a server gone for the rest of the collection fails it, naming the server and "
                        "every row it lost, at the first request deadline of those rows, whatever share "
                        "of the batch it carried"
                    ),
                ),
                evidence,
            )
        named = "; ".join(f"{outage.server!r} (rows {list(outage.lost)})" for outage in lost)
        return verdict(
            self.name,
            Status.PASS,
            f"the collection failed at t={ended - t0:.2f}s naming the server that went down and its "
            f"rows: {named}",
            evidence,
        )


def routes(observation: Observation) -> dict[str, list[int]]:
    """Server name -> the requested rows routed to it (``agent_ref.name``)."""
    routed: dict[str, list[int]] = {}
    for position, row in enumerate(observation.rows):
        ref = row.get("agent_ref")
        name = ref.get("name") if isinstance(ref, Mapping) else None
        if isinstance(name, str):
            routed.setdefault(name, []).append(row_index(row, position))
    return routed


def find_outages(
    history: History, routed: Mapping[str, Sequence[int]], *, started: float, ended: float
) -> list[Outage]:
    """Each server in ``routed`` that went down during the collection and stayed down to its end."""
    events = history.events()
    requests = spans(history)
    found = []
    for server, rows in routed.items():
        downs = [event for event in events if started <= event.t <= ended and _down(event, server)]
        backs = [
            event.t
            for event in events
            if started <= event.t <= ended
            and event.source == "fault"
            and event.op == "restart"
            and event.data.get("server") == server
        ]
        backs += [
            span.ended
            for span in requests
            if span.answered
            and span.ended is not None
            and started <= span.ended <= ended
            and span.invoke.data.get("server") == server
        ]
        last_back = max(backs, default=float("-inf"))
        after = [event for event in downs if event.t > last_back]
        if not after:
            continue
        sign = min(after, key=lambda event: event.t)
        done = _succeeded(history, before=sign.t)
        lost = tuple(row for row in rows if row not in done)
        found.append(Outage(server, sign.t, sign, tuple(rows), lost))
    return found


def _down(event: Event, server: str) -> bool:
    """The server's exit, or a connection into it refused (as the fault layer recorded it)."""
    if event.data.get("server") != server:
        return False
    if event.source == "process" and event.op == "exit":
        return True
    return "link" in event.data and event.kind == "info" and REFUSED in str(event.data.get("error", ""))


def _succeeded(history: History, *, before: float) -> set[int]:
    """Rows with a successful ``/run`` by ``before``: an answer under 300 at the layer, or the Gym
    client's ``ok``."""
    done = {
        span.row
        for span in spans(history)
        if span.op == RUN_OP
        and span.row is not None
        and span.status is not None
        and span.status < 300
        and span.ended is not None
        and span.ended <= before
    }
    for event in history.events(source="collector", kind="ok", op="run"):
        row = event.data.get("row")
        if event.t <= before and isinstance(row, int) and not isinstance(row, bool):
            done.add(row)
    return done


def _judge(observation: Observation, outage: Outage) -> str | None:
    """What the collector did wrong about ``outage``, or None."""
    t0 = observation.history.t0
    down = f"{outage.server!r} went down at t={outage.began - t0:.2f}s and stayed down"
    if observation.timed_out:
        return f"{down}, and the collection never ended"
    if observation.raised is None:
        handed = _handed(observation, outage.lost)
        return (
            f"{down}, yet the collector handed the batch back with its rows {list(outage.lost)} {handed}: "
            "an outage treated as a share of bad rows"
        )
    text = " ".join(str(link) for link in chain(observation.raised))
    missing = [str(row) for row in outage.lost if not re.search(rf"(?<![\w.]){row}(?![\w.])", text)]
    unnamed = ([f"the server {outage.server!r}"] if outage.server not in text else []) + (
        [f"rows {', '.join(missing)}"] if missing else []
    )
    if unnamed:
        return f"{down}; the collector raised, but its error does not name {' or '.join(unnamed)}"
    timeout_s = observation.request_timeout_s
    ended = observation.ended_at
    if timeout_s is None or ended is None:
        return None
    first = _first_deadline(observation.history, outage, timeout_s)
    allowed = first + margin_s(timeout_s)
    if ended > allowed:
        return (
            f"{down}; the collector raised at t={ended - t0:.2f}s, {ended - first:.2f}s after the first "
            f"request deadline of its rows (t={first - t0:.2f}s), where {margin_s(timeout_s):.2f}s were "
            "allowed"
        )
    return None


def _handed(observation: Observation, rows: Sequence[int]) -> str:
    statuses = {
        rollout.row_index: rollout.status for rollout in observation.rollouts or () if rollout is not None
    }
    parts = [f"row {row}: {statuses.get(row, 'missing')}" for row in rows]
    return f"({'; '.join(parts)})"


def _first_deadline(history: History, outage: Outage, timeout_s: float) -> float:
    """The earliest first ``/run`` of a lost row plus ``timeout_s`` (one deadline past the outage
    when that came before it)."""
    lost = set(outage.lost)
    sends = [span.began for span in spans(history) if span.op == RUN_OP and span.row in lost]
    sends += [
        event.t
        for event in history.events(source="collector", kind="invoke", op="run")
        if event.data.get("row") in lost
    ]
    deadline = min(sends, default=outage.began) + timeout_s
    # a row sent long before the outage had its deadline before it: the next one comes after it
    return deadline if deadline >= outage.began else outage.began + timeout_s
