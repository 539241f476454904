"""Turn one scenario's History into the lanes, bands and markers the HTML report draws.

Pure data, no drawing: x is seconds since the History started (the collection's start). Each
requested row gets a lane built from the events that carry ``data["row"]``: the collector's
``run`` attempts (``invoke`` then ``ok``/``fail``/``info``), its ``retry`` and ``rollout``
facts, and the servers' own requests. Faults become bands from the moment their ``inject``
began to their ``heal`` (or the end of the picture when never healed); process exits, restarts
and the start of each collection after the first (``workload.collections``) become markers across
all lanes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pytest_rollout_chaos.history import Event

Outcome = Literal["completed", "truncated", "aborted", "missing", "raised", "timed out", "unknown"]
SpanStatus = Literal["ok", "fail", "cancelled", "open"]
MarkKind = Literal["retry", "repair", "request", "request-fail", "turn", "effect"]
Family = Literal["network", "process", "semantic", "other"]

OUTCOMES: Final[tuple[Outcome, ...]] = (
    "completed",
    "truncated",
    "aborted",
    "missing",
    "raised",
    "timed out",
    "unknown",
)
SERVER_SOURCES: Final = frozenset({"agent", "resources", "model", "policy", "head"})
NOT_FAULT_PARAMS: Final = frozenset({"fault", "target", "took_s", "error"})
# Parameters worth a place in a band's short label; the tooltip has them all.
LABEL_PARAM_SUFFIXES: Final = ("_ms", "_s", "_kb", "_mb", "_bytes", "_kbps")
LABEL_PARAMS: Final = frozenset({"shape", "status", "code"})


@dataclass(frozen=True, slots=True)
class Span:
    """One attempt of a row: from the collector's ``run`` invoke to its end (``open``: never ended)."""

    start_s: float
    end_s: float
    status: SpanStatus
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Mark:
    """A point on a lane: a retry, a prefix repair, a server request or an agent turn."""

    t_s: float
    kind: MarkKind
    label: str


@dataclass(frozen=True, slots=True)
class Lane:
    """One requested row: its label, its final outcome, its attempts and its marks."""

    row: int
    label: str
    outcome: Outcome
    spans: tuple[Span, ...]
    marks: tuple[Mark, ...]
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Band:
    """A fault held from ``start_s`` to ``end_s`` (the end of the picture when never healed)."""

    start_s: float
    end_s: float
    kind: str
    target: str
    label: str
    family: Family
    healed: bool
    failed: bool
    details: str = ""


@dataclass(frozen=True, slots=True)
class Marker:
    """A fact across every lane: a process exit, a restart, or the start of a collection after the
    first (``workload.collections``: the next step, on the same rows' lanes)."""

    t_s: float
    kind: Literal["exit", "restart", "step"]
    label: str


@dataclass(frozen=True, slots=True)
class Timeline:
    """Everything the picture of one scenario needs; times in seconds since the collection started."""

    end_s: float
    collection_start_s: float
    collection_end_s: float
    deadline_s: float | None
    lanes: tuple[Lane, ...]
    bands: tuple[Band, ...]
    markers: tuple[Marker, ...]
    effects: tuple[Mark, ...]
    collect_status: Literal["ok", "fail", "open", "none"]


def family(kind: str) -> Family:
    """The band colour: the family the fault class declares; Ray's faults end processes too."""
    # Imported here, when a band is drawn: the plugin's own import stays light.
    from pytest_rollout_chaos.faults import registry

    cls = registry.FAULTS.get(kind)
    if cls is None:
        return "semantic" if kind else "other"
    declared = str(cls.family)
    if declared in ("process", "ray"):
        return "process"
    return "network" if declared == "network" else "semantic"


def row_outcomes(
    rows: Sequence[Mapping[str, Any]],
    rollouts: Sequence[Any] | None,
    *,
    raised: bool,
    timed_out: bool,
) -> dict[int, Outcome]:
    """Each requested row's fate: the status of its rollout, or why there is none."""
    indices = [_row_index(row, position) for position, row in enumerate(rows)]
    if rollouts is None:
        fate: Outcome = "timed out" if timed_out else "raised" if raised else "missing"
        return dict.fromkeys(indices, fate)
    returned: dict[int, Outcome] = {}
    for rollout in rollouts:
        index = getattr(rollout, "row_index", None)
        status = getattr(rollout, "status", None)
        if isinstance(index, int):
            returned[index] = status if status in ("completed", "truncated", "aborted") else "unknown"
    return {index: returned.get(index, "missing") for index in indices}


def build_timeline(
    events: Sequence[Event],
    *,
    t0: float,
    rows: Sequence[Mapping[str, Any]],
    outcomes: Mapping[int, Outcome],
    elapsed_s: float,
    deadline_s: float | None = None,
) -> Timeline:
    """Lanes per requested row, fault bands and exit markers from ``events`` (times relative to ``t0``)."""
    last_s = max([elapsed_s, *(event.t - t0 for event in events)], default=elapsed_s)
    collect_start_s, collect_end_s = _collect_extent(events, t0, elapsed_s)
    end_s = max(last_s, 1e-3)
    lanes = tuple(
        _lane(
            _row_index(row, position), row, events, t0=t0, outcomes=outcomes, collection_end_s=collect_end_s
        )
        for position, row in enumerate(rows)
    )
    return Timeline(
        end_s=end_s,
        collection_start_s=collect_start_s,
        collection_end_s=collect_end_s,
        deadline_s=deadline_s,
        lanes=lanes,
        bands=tuple(_bands(events, t0, end_s)),
        markers=tuple(_markers(events, t0)),
        effects=tuple(
            Mark(event.t - t0, "effect", _effect_label(event)) for event in events if _is_effect(event)
        ),
        collect_status=_collect_status(events),
    )


def _row_index(row: Mapping[str, Any], position: int) -> int:
    value = row.get("_rowidx")
    return value if isinstance(value, int) else position


def _row_label(index: int, row: Mapping[str, Any]) -> str:
    ref = row.get("agent_ref")
    agent = ref.get("name") if isinstance(ref, Mapping) else None
    if isinstance(agent, str) and agent:
        return f"row {index} · {agent.removesuffix('_agent')}"
    return f"row {index}"


def _lane(
    index: int,
    row: Mapping[str, Any],
    events: Sequence[Event],
    *,
    t0: float,
    outcomes: Mapping[int, Outcome],
    collection_end_s: float,
) -> Lane:
    mine = [event for event in events if event.data.get("row") == index]
    spans: list[Span] = []
    marks: list[Mark] = []
    open_at: float | None = None
    detail = ""
    for event in mine:
        t_s = event.t - t0
        if event.source == "collector" and event.op == "run":
            if event.kind == "invoke":
                if open_at is not None:  # a new attempt without an end: the old one was dropped
                    spans.append(Span(open_at, t_s, "open"))
                open_at = t_s
            elif open_at is not None:
                status: SpanStatus = (
                    "ok" if event.kind == "ok" else "fail" if event.kind == "fail" else "cancelled"
                )
                spans.append(Span(open_at, t_s, status, str(event.data.get("error") or "")))
                open_at = None
        elif event.source == "collector" and event.op == "retry":
            marks.append(Mark(t_s, "retry", f"retry {event.data.get('attempt', '?')}: {_reason(event)}"))
        elif event.source == "collector" and event.op == "prefix_repair":
            marks.append(Mark(t_s, "repair", f"prefix repaired (drift {event.data.get('drift')!r})"))
        elif event.source == "collector" and event.op == "rollout":
            detail = str(event.data.get("error") or "")
        elif _is_effect(event):
            marks.append(Mark(t_s, "effect", _effect_label(event)))
        elif event.source == "agent" and event.op == "turn":
            marks.append(Mark(t_s, "turn", f"agent turn {event.data.get('turn', '?')}"))
        elif event.source in SERVER_SOURCES and event.kind in ("ok", "fail"):
            failed = event.kind == "fail" or _status(event) >= 400
            kind: MarkKind = "request-fail" if failed else "request"
            marks.append(Mark(t_s, kind, f"{event.source} {event.op} → {event.data.get('status', '?')}"))
    if open_at is not None:
        spans.append(Span(open_at, max(collection_end_s, open_at), "open", "no answer recorded"))
    if not spans and mine:
        # A collector that records no ``run`` attempts (native style): the row's first to last event.
        first, last = mine[0].t - t0, mine[-1].t - t0
        spans.append(Span(first, max(last, first), "ok"))
    return Lane(
        row=index,
        label=_row_label(index, row),
        outcome=outcomes.get(index, "unknown"),
        spans=tuple(spans),
        marks=tuple(marks),
        detail=detail,
    )


def _is_effect(event: Event) -> bool:
    """A server's fault hook that actually changed something (a hit that changed nothing is noise)."""
    return event.op == "hook" and event.data.get("changed") != 0


def _effect_label(event: Event) -> str:
    details = ", ".join(
        f"{key}={value}"
        for key, value in event.data.items()
        if key not in ("effect", "rule") and value is not None
    )
    return f"{event.source}: {event.data.get('effect', 'fault')} ({details})" if details else event.source


def _status(event: Event) -> int:
    status = event.data.get("status")
    return status if isinstance(status, int) else 0


def _reason(event: Event) -> str:
    return str(event.data.get("reason") or event.data.get("error") or "")


def _bands(events: Sequence[Event], t0: float, end_s: float) -> list[Band]:
    """Pair each ``inject`` with the next ``heal`` of the same fault on the same target."""
    open_faults: dict[tuple[str, str], list[tuple[float, Event]]] = {}
    bands: list[Band] = []
    for event in events:
        if event.source != "fault" or event.op not in ("inject", "heal"):
            continue
        kind = str(event.data.get("fault", "?"))
        target = str(event.data.get("target", "?"))
        took_s = event.data.get("took_s")
        began_s = event.t - t0 - (took_s if isinstance(took_s, int | float) else 0.0)
        key = (kind, target)
        if event.op == "inject":
            open_faults.setdefault(key, []).append((max(began_s, 0.0), event))
            continue
        pending = open_faults.get(key)
        if pending:
            start_s, inject = pending.pop(0)
            bands.append(_band(start_s, event.t - t0, inject, healed=True))
    for pending in open_faults.values():
        for start_s, inject in pending:
            bands.append(_band(start_s, end_s, inject, healed=False))
    return sorted(bands, key=lambda band: (band.start_s, band.end_s))


def _band(start_s: float, end_s: float, inject: Event, *, healed: bool) -> Band:
    kind = str(inject.data.get("fault", "?"))
    target = str(inject.data.get("target", "?"))
    params = {
        key: value
        for key, value in inject.data.items()
        if key not in NOT_FAULT_PARAMS and value is not None and not isinstance(value, Mapping | list)
    }
    short = ", ".join(
        f"{key}={value}"
        for key, value in params.items()
        if key in LABEL_PARAMS or key.endswith(LABEL_PARAM_SUFFIXES)
    )
    failed = "error" in inject.data
    label = f"{kind} on {target}"
    if failed:
        label += f" (inject failed: {inject.data.get('error')})"
    elif short:
        label += f" ({short})"
    return Band(
        start_s=start_s,
        end_s=max(end_s, start_s),
        kind=kind,
        target=target,
        label=label,
        family=family(kind),
        healed=healed,
        failed=failed,
        details=", ".join(f"{key}={value}" for key, value in params.items()),
    )


def _markers(events: Sequence[Event], t0: float) -> list[Marker]:
    markers: list[Marker] = []
    for event in events:
        if event.source == "process" and event.op == "exit":
            code = event.data.get("code")
            signal_number = event.data.get("signal")
            why = f"signal {signal_number}" if signal_number else f"exit {code}"
            markers.append(Marker(event.t - t0, "exit", f"{event.data.get('server', '?')} {why}"))
        elif event.source == "fault" and event.op == "restart":
            markers.append(Marker(event.t - t0, "restart", f"{event.data.get('server', '?')} restarted"))
        elif event.source == "engine" and event.op == "collection" and event.kind == "invoke":
            markers.append(Marker(event.t - t0, "step", f"collection {event.data.get('collection', '?')}"))
    return markers


def _collect_extent(events: Sequence[Event], t0: float, elapsed_s: float) -> tuple[float, float]:
    """From the collector's ``collect`` invoke to its end; ``elapsed_s`` when it recorded none."""
    collects = [event.t - t0 for event in events if event.source == "collector" and event.op == "collect"]
    if not collects:
        return 0.0, elapsed_s
    start_s = collects[0]
    end_s = collects[-1] if len(collects) > 1 else max(elapsed_s, start_s)
    return start_s, end_s


def _collect_status(events: Sequence[Event]) -> Literal["ok", "fail", "open", "none"]:
    collects = [event for event in events if event.source == "collector" and event.op == "collect"]
    if not collects:
        return "none"
    last = collects[-1].kind
    return "ok" if last == "ok" else "fail" if last == "fail" else "open"
