"""Requests as the fault layer saw them, paired into spans; which of them the collector itself sent.

The layer records every request on every link (``invoke``, then ``ok``/``fail`` with a status,
or ``info`` when it ended with no answer). A request on a ``collector->`` link is one the
collector sent, except a resend by NeMo Gym's transport: ``ctx.gym``, like NeMo Gym's client,
resends a ``/run`` the server never answered (refused, reset, cut) every 0.5 s without limit,
which no collector can stop through ``run_examples``. Such a resend (the same link, route and
row as a request that had just ended with no answer) is told apart, so ``ends_promptly``,
``quiet_after_end`` and ``cancel_honoured`` judge what the collector did, not what the
transport does on its own.

``sent_after`` is what those two last ones ask: what the collector started after a moment. The
layer sees a request a little after it was sent, so its record counts only past ``GRACE_S``;
``ctx.gym``'s own record (``collector invoke run`` when a row's ``/run`` starts, and
``run_examples_after_close`` for a call it refused once closed) is taken in the collector's
process, at the moment itself, so it needs no grace: where it exists it stands for the
``/run``s, and the layer covers every other request and every other client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from pytest_rollout_chaos.history import Event, History

COLLECTOR_LINK_PREFIX: Final = "collector->"
GRACE_S: Final = 0.5
RUN_OP: Final = "POST /run"
AFTER_CLOSE: Final = "run_examples_after_close"


@dataclass(frozen=True, slots=True)
class Span:
    """One request the layer saw: where, when it began and ended, and how (``None``: still open)."""

    request_id: str
    link: str
    op: str
    row: int | None
    began: float
    invoke: Event
    ended: float | None = None
    outcome: str | None = None  # "ok" | "fail" | "info"
    status: int | None = None
    error: str | None = None  # why it ended with no answer, as the layer wrote it

    @property
    def answered(self) -> bool:
        """A server answered it, with any HTTP status."""
        return self.status is not None

    @property
    def from_collector(self) -> bool:
        return self.link.startswith(COLLECTOR_LINK_PREFIX)


def spans(history: History) -> list[Span]:
    """Every layer request, in the order they began."""
    found: dict[str, Span] = {}
    for event in history.events():
        if "link" not in event.data or event.op == "hook" or event.request_id is None:
            continue
        if event.kind == "invoke":
            row = event.data.get("row")
            found[event.request_id] = Span(
                event.request_id,
                str(event.data["link"]),
                event.op,
                row if isinstance(row, int) and not isinstance(row, bool) else None,
                event.t,
                event,
            )
        elif event.request_id in found:
            status = event.data.get("status")
            found[event.request_id] = replace(
                found[event.request_id],
                ended=event.t,
                outcome=event.kind,
                status=status if isinstance(status, int) and event.kind != "info" else None,
                error=str(event.data["error"]) if event.kind == "info" and "error" in event.data else None,
            )
    return sorted(found.values(), key=lambda span: span.began)


def collector_sends(requests: Sequence[Span]) -> list[Span]:
    """The requests the collector sent itself: those on its links, less the transport's resends."""
    last: dict[tuple[str, str, int | None], Span] = {}
    sent = []
    for span in requests:
        if not span.from_collector:
            continue
        key = (span.link, span.op, span.row)
        before = last.get(key)
        resend = (
            span.row is not None
            and before is not None
            and before.outcome == "info"
            and before.ended is not None
            and before.ended <= span.began
        )
        last[key] = span
        if not resend:
            sent.append(span)
    return sent


@dataclass(frozen=True, slots=True)
class Sent:
    """Something the collector started after the moment asked about, and where it was seen."""

    t: float
    row: int | None
    line: str


def sent_after(history: History, moment: float) -> list[Sent]:
    """What the collector started after ``moment``: the Gym client's records, then the layer's."""
    t0 = history.t0
    runs = history.events(source="collector", kind="invoke", op="run")
    found = [
        Sent(event.t, _row(event.data.get("row")), f"the Gym client: {event.describe(t0)}")
        for event in runs
        if event.t > moment
    ]
    for event in history.events(source="collector", op=AFTER_CLOSE):
        rows = [row for row in event.data.get("rows") or () if isinstance(row, int)]
        found += [Sent(event.t, row, f"the closed Gym client refused: {event.describe(t0)}") for row in rows]
        if not rows:
            found.append(Sent(event.t, None, f"the closed Gym client refused: {event.describe(t0)}"))
    found += [
        Sent(span.began, span.row, f"the layer: {span.invoke.describe(t0)}")
        for span in collector_sends(spans(history))
        if span.began > moment + GRACE_S and not (runs and span.op == RUN_OP)  # counted once, above
    ]
    return sorted(found, key=lambda sent: sent.t)


def turn_of(span: Span) -> tuple[int, int] | None:
    """The row and turn a native model call was sent for: its row, and the assistant messages it
    carries (``servers.faultlayer.asked``); None for a call that cannot be placed so."""
    turn = span.invoke.data.get("turn")
    if span.row is None or not isinstance(turn, int) or isinstance(turn, bool):
        return None
    return span.row, turn


def _row(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
