"""``raise_has_cause``: a collector that fails the whole batch shows a batch-level cause for it.

Raising is the right answer when the batch as a whole is meaningless: fewer results than rows,
a server dead or unreachable, more rows failed than the collector's own aborted bound
(``max_aborted_fraction``), a request or the collection past its deadline, the caller
cancelling. One row's own trouble is not such a cause: a row that drifted, a row whose logprobs
were NaN, one trajectory that raised while its siblings' ``/run``s answered ok. That row aborts
and the rest come back; failing the batch for it is slime's gather before #2078 in another form
(NeMo RL's "Non-contiguous messages found!" assert fails its whole step on one drifted result).

So when the collector raised, the History must show such a cause at or before the raise: the
Gym client's record of a short count; a process exit or the policy loading; an injected process,
Ray or connection-breaking network fault; a request the fault layer saw its server cut off;
rows failed on the servers (an HTTP error, a cut answer, non-finite logprobs, a fault that
breaks the row) above the aborted bound; a request, or the collection, waiting past the
collector's own deadline; the ``cancel`` fault. The collector's own words (its exception, its
``rollout`` events) are claims, never evidence. Records lag the moment they describe a little
(a process exit is noticed, an inject is recorded once it returns), so ``GRACE_S`` past the
raise still counts. Without a raise there is nothing to explain (NOT_JUDGED). This invariant stands: it
judges every scenario, listed in ``expect.invariants`` or not (``registry.STANDING``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import ClassVar, Final

from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict
from pytest_rollout_chaos.invariants.sends import COLLECTOR_LINK_PREFIX, spans

GRACE_S: Final = 0.5
# Faults that stop a server or cut its connections: a whole batch may fail under them.
UNREACHABLE_FAULTS: Final = frozenset(
    {"kill", "oom", "freeze", "exit_zero", "restart", "actor_kill", "node_down", "host_lost", "partition"}
    | {"down", "reset_peer", "timeout", "limit_data"}
)
# Fault-layer effects that leave the row they hit with nothing usable: a row to abort. A hung
# request is no failure until its deadline passes, which ``_deadline_passed`` judges.
ROW_BREAKING_EFFECTS: Final = frozenset(
    {"http_error", "trajectory_exception", "malformed_json", "nan_logprobs"}
)
UNREPAIRABLE_DRIFT: Final = "end_of_turn"  # the prefix_drift mode EOS-boundary splicing cannot repair
# The fault layer's note on a request whose client went away first (the collector dropped it),
# which is no server's failure; ``servers.faultlayer.proxy.CLIENT_CLOSED``.
CLIENT_CLOSED: Final = "the client closed the connection"


class RaiseHasCause:
    name: ClassVar[str] = "raise_has_cause"

    def check(self, observation: Observation) -> Verdict:
        raised = observation.raised
        if raised is None:
            return not_judged(self.name, "the collector did not raise: no cause to show")
        ended = observation.ended_at
        until = math.inf if ended is None else ended + GRACE_S
        events = [event for event in observation.history.events() if _when(event) <= until]
        failed = failed_rows(events, observation.requested)
        causes = batch_causes(observation, events, until, failed)
        name = type(raised).__name__
        if causes:
            return verdict(
                self.name,
                Status.PASS,
                f"the collector raised {name} with a batch-level cause: {causes[0]}",
                causes,
            )
        at = "" if ended is None else f" at t={ended - observation.history.t0:.2f}s"
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"the batch failed for no batch-level cause: the collector raised {name}{at}, and the "
                    "History shows no short count, no server down or cut off, no cancel, no deadline "
                    f"passed, and {len(failed)} of {len(observation.rows)} rows failed on the servers "
                    f"(aborted bound {observation.max_aborted_fraction:g})"
                ),
                expected=(
                    "a row's own trouble (drift, NaN logprobs, one trajectory failing) aborts that row and "
                    "the rest come back; raise only for a short count, a dead or unreachable server, "
                    "failed rows above max_aborted_fraction, a deadline, or a cancellation"
                ),
            ),
            row_trouble(observation, events, failed),
        )


def batch_causes(
    observation: Observation, events: Sequence[Event], until: float, failed: Mapping[int, str]
) -> list[str]:
    """Every batch-level cause among ``events`` (those up to ``until``), one line each."""
    lines = _event_causes(observation, events)
    if _above_bound(observation, failed):
        lines.append(
            f"{len(failed)} of {len(observation.rows)} rows failed on the servers, above "
            f"max_aborted_fraction={observation.max_aborted_fraction:g}"
        )
    return lines + _deadline_passed(observation, until)


def rows_alone_failed(observation: Observation) -> dict[int, str]:
    """The rows that failed on the servers, when they alone explain the raise: more of them than
    ``max_aborted_fraction`` allows and no other batch-level cause in the History (the raise then
    speaks for them, so it owes their causes). Empty otherwise, and without a raise."""
    if observation.raised is None:
        return {}
    ended = observation.ended_at
    until = math.inf if ended is None else ended + GRACE_S
    events = [event for event in observation.history.events() if _when(event) <= until]
    failed = failed_rows(events, observation.requested)
    alone = _above_bound(observation, failed) and not _event_causes(observation, events)
    return failed if alone and not _deadline_passed(observation, until) else {}


def _above_bound(observation: Observation, failed: Mapping[int, str]) -> bool:
    return len(failed) / max(1, len(observation.rows)) > observation.max_aborted_fraction


def _event_causes(observation: Observation, events: Sequence[Event]) -> list[str]:
    """The batch-level causes the records of ``events`` show: a cancel, a fault that stops or cuts
    off a server, a process exit, a short count, a server cutting a request off."""
    t0 = observation.history.t0
    causes: dict[str, str] = {}  # one line per cause: a server cutting off every request is one
    for event in events:
        at = f"at t={_when(event) - t0:.2f}s"
        data = event.data
        if event.source == "fault" and event.op == "inject":
            if data.get("fault") == "cancel" and data.get("cancelled"):
                causes.setdefault("cancel", f"the collection was cancelled from outside {at}")
            elif data.get("fault") in UNREACHABLE_FAULTS:
                what = f"{data['fault']} on {data.get('target', '?')}"
                causes.setdefault(what, f"{what} {at}")
        elif event.source == "process":
            what = f"server {data.get('server', '?')}: {event.op}"
            causes.setdefault(what, f"{what} {at}")
        elif event.op == "short_results" and _short(event):
            line = f"the Gym client yielded {data['yielded']} results for {data['rows']} rows {at}"
            causes.setdefault("short", f"short count: {line}")
        elif _cut_by_server(event):
            server = data.get("server", event.source)
            causes.setdefault(f"cut {server}", f"{server} cut off {event.op} {at}: {data['error']}")
    return list(causes.values())


def failed_rows(events: Sequence[Event], requested: Sequence[int]) -> dict[int, str]:
    """Requested rows the records show failed, with the first reason for each.

    A row fails on an HTTP error or a cut answer to a request the collector sent for it, an
    answer carrying a non-finite logprob, a fault-layer effect that breaks it (unrepairable drift
    included), or the Gym client's record of its ``/run`` failing. Repairable drift is no failure:
    splicing mends it. An inner request's failure (an agent's tool call) counts only through the
    answer the collector got.
    """
    wanted = set(requested)
    found: dict[int, str] = {}
    for event in events:
        row = event.data.get("row")
        if isinstance(row, int) and not isinstance(row, bool) and row in wanted and row not in found:
            reason = _row_failure(event)
            if reason is not None:
                found[row] = reason
    return found


def row_trouble(observation: Observation, events: Sequence[Event], failed: Mapping[int, str]) -> list[str]:
    """Evidence for a FAIL: what went wrong in single rows, and which rows the servers answered."""
    t0 = observation.history.t0
    lines = [f"row {row} failed: {reason}" for row, reason in sorted(failed.items())]
    lines += [
        f"row {event.data.get('row')}: prefix_drift ({event.data.get('mode', 'replace')}) on "
        f"{event.data.get('route')} at t={event.t - t0:.2f}s"
        for event in events
        if event.op == "hook" and event.data.get("effect") == "prefix_drift"
    ][:6]
    ended = observation.ended_at
    answered = {
        span.row
        for span in spans(observation.history)
        if span.from_collector and span.row is not None and span.outcome == "ok" and span.ended is not None
        if ended is None or span.ended <= ended
    }
    if answered:
        lines.append(f"rows the servers answered ok before the raise: {sorted(answered)}")
    return lines


def _row_failure(event: Event) -> str | None:
    data = event.data
    if event.source == "collector":  # the Gym client's own record of a row's /run
        failed = event.op == "run" and event.kind == "fail"
        return f"the Gym client's /run failed: {data.get('error')}" if failed else None
    if event.op == "hook":  # a fault-layer effect on any request of the row, inner ones included
        effect = data.get("effect")
        breaks = effect in ROW_BREAKING_EFFECTS or (
            effect == "prefix_drift" and data.get("mode") == UNREPAIRABLE_DRIFT
        )
        acted = data.get("changed") != 0 and "skipped" not in data
        return f"{effect} on {data.get('route')} ({data.get('server')})" if breaks and acted else None
    if not str(data.get("link", "")).startswith(COLLECTOR_LINK_PREFIX):
        return None
    if event.kind == "fail":
        return f"{event.op} answered HTTP {data.get('status')} ({data.get('server')})"
    if _cut_by_server(event):
        return f"{event.op} cut off: {data.get('error')}"
    if event.kind == "ok" and any(":x" in str(digest) for digest in data.get("logprobs") or ()):
        return f"{event.op} answered non-finite logprobs ({data.get('server')})"
    return None


def _deadline_passed(observation: Observation, until: float) -> list[str]:
    """The collection at ``collect_timeout_s``, or a request waiting past ``request_timeout_s``
    (from when the fault layer saw it begin, less ``GRACE_S`` for the way there)."""
    found = []
    limit_s = observation.collect_timeout_s
    if limit_s is not None and observation.elapsed_s >= limit_s - GRACE_S:
        found.append(f"the collection ran {observation.elapsed_s:.2f}s, to collect_timeout_s={limit_s:g}")
    timeout_s = observation.request_timeout_s
    if timeout_s is None or not math.isfinite(until):
        return found
    t0 = observation.history.t0
    for span in spans(observation.history):
        waited = (span.ended if span.ended is not None and span.ended <= until else until) - span.began
        if span.began <= until and waited >= timeout_s - GRACE_S:
            found.append(
                f"{span.op} on {span.link} (row {span.row}) waited {waited:.2f}s from "
                f"t={span.began - t0:.2f}s, past request_timeout_s={timeout_s:g}"
            )
            break
    return found


def _short(event: Event) -> bool:
    rows, yielded = event.data.get("rows"), event.data.get("yielded")
    return isinstance(rows, int) and isinstance(yielded, int) and yielded < rows


def _cut_by_server(event: Event) -> bool:
    """The fault layer saw this request end with no answer, and not because its client left."""
    error = event.data.get("error")
    return "link" in event.data and event.kind == "info" and bool(error) and error != CLIENT_CLOSED


def _when(event: Event) -> float:
    """When ``event`` happened: a fault acts from its inject's start, recorded ``took_s`` later."""
    took_s = event.data.get("took_s") if event.source == "fault" else None
    return event.t - took_s if isinstance(took_s, int | float) and not isinstance(took_s, bool) else event.t
