"""``row_deadline_kept``: a request the collector gives up on had its own whole deadline, no more.

``ends_promptly`` judges the collection's end against its last progress; this judges each row's
request on its own clock. A collector that counts a request's ``request_timeout_s`` from
somewhere else than the request's own send (the start of ``collect``, the batch's first request,
the last answer of any row) passes while every row starts at once: the clocks agree. Once rows
queue behind a concurrency limit they part: a row that waited for its permit starts with part
of its budget, or none, and is cut while its agent is still working on it, and the trainer
drops a healthy row as failed.

The judge is the fault layer's record: a request on a collector link that ended with the client
closing its connection (``the client closed the connection``) is one the collector gave up on.
From its first send (a resend of NeMo Gym's transport, after a cut, is the same request going on)
to that close, it must have had ``request_timeout_s`` less a slack (``slack_s``: the layer sees
a request and its close a little after the collector acts, each by its own lag on a loaded
machine), and at most ``request_timeout_s`` plus ``ends_promptly``'s margin.
Where the collection raised, was cut or was cancelled, a close from ``GRACE_S`` before its end
(or from the cancel) may be that end's, not a give-up: there only a close at the request's own
deadline counts (for the verdict, never against it). Where it returned, a close the layer saw
after its end counts for a row it handed back (a give-up seen late); a row it did not hand back
was left running, and the harness closed it (``no_silent_short_count``'s to judge). A close
while a fault on the network was on (a Toxiproxy toxic or cut, a partition) is the network's.
NOT_JUDGED where the collector gave up on no request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Final

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict
from pytest_rollout_chaos.invariants.ends_promptly import margin_s
from pytest_rollout_chaos.invariants.raise_has_cause import CLIENT_CLOSED
from pytest_rollout_chaos.invariants.sends import GRACE_S, Span, spans

SLACK_MIN_S: Final = 0.5
SLACK_SHARE: Final = 0.1  # of request_timeout_s
SHOWN: Final = 6


def slack_s(request_timeout_s: float) -> float:
    """How much sooner than its deadline the layer may see a request given up, by lag alone."""
    return max(SLACK_MIN_S, SLACK_SHARE * request_timeout_s)


@dataclass(frozen=True, slots=True)
class GivenUp:
    """One request the collector gave up on: its first send, and the span that ended with the close."""

    first: Span
    closed: Span

    @property
    def held_s(self) -> float:
        assert self.closed.ended is not None
        return self.closed.ended - self.first.began

    def describe(self, t0: float) -> str:
        row = f"row {self.first.row}" if self.first.row is not None else "no row"
        return (
            f"{row}: {self.first.op} on {self.first.link} sent at t={self.first.began - t0:.2f}s, "
            f"given up at t={self.held_s + self.first.began - t0:.2f}s ({self.held_s:.2f}s)"
        )


class RowDeadlineKept:
    name: ClassVar[str] = "row_deadline_kept"

    def check(self, observation: Observation) -> Verdict:
        ended, timeout_s = observation.ended_at, observation.request_timeout_s
        if observation.started_at is None or ended is None or timeout_s is None:
            return not_judged(self.name, "when the collection ended or its request_timeout_s is unknown")
        history = observation.history
        margin, slack = margin_s(timeout_s), slack_s(timeout_s)
        ending = _ending_from(observation, ended)
        network = _network_faults(history)
        own, at_end = [], []
        left_running = _left_running(observation)
        for request in given_up_requests(history):
            closed = request.closed.ended
            if closed is None or any(since <= closed <= until for since, until in network):
                continue
            if closed > ended and request.first.row in left_running:
                continue
            if closed < ending:
                own.append(request)
            elif timeout_s - slack <= request.held_s <= timeout_s + margin:
                at_end.append(request)  # its deadline, which was also the collection's end
        if not own and not at_end:
            return not_judged(self.name, "the collector gave up on no request of its own accord")
        early = [request for request in own if request.held_s < timeout_s - slack]
        late = [request for request in own if request.held_s > timeout_s + margin]
        t0 = history.t0
        if not early and not late:
            held = [request.held_s for request in own + at_end]
            return verdict(
                self.name,
                Status.PASS,
                f"{len(held)} requests given up, each after {min(held):.2f}s to {max(held):.2f}s of its own "
                f"(request_timeout_s={timeout_s:g})",
            )
        problems = []
        if early:
            problems.append(
                f"{len(early)} requests were given up before their own request_timeout_s={timeout_s:g} "
                f"(the shortest after {min(r.held_s for r in early):.2f}s)"
            )
        if late:
            problems.append(
                f"{len(late)} requests were held past request_timeout_s={timeout_s:g} plus a {margin:.2f}s "
                f"margin (the longest {max(r.held_s for r in late):.2f}s)"
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what="a row's deadline was not its own: " + "; ".join(problems),
                expected=(
                    f"each request given up after request_timeout_s={timeout_s:g} counted from its own send, "
                    "not from the start of collect, a queue it waited in or a share of the row's attempts"
                ),
            ),
            [request.describe(t0) for request in (early + late)[:SHOWN]],
        )


def given_up_requests(history: History) -> list[GivenUp]:
    """The requests for a row that the collector's client closed, each from its first send.

    A request cut by a fault and resent by the transport (the same link, route and row, sent
    once the last send ended with no answer and no close) goes on as the same request.
    """
    first_of: dict[tuple[str, str, int], Span] = {}
    last_of: dict[tuple[str, str, int], Span] = {}
    found = []
    for span in spans(history):
        if not span.from_collector or span.row is None:
            continue
        key = (span.link, span.op, span.row)
        before = last_of.get(key)
        first = first_of[key] if before is not None and _resent(before, span) else span
        first_of[key], last_of[key] = first, span
        if _closed_by_client(span):
            found.append(GivenUp(first, span))
    return found


def _closed_by_client(span: Span) -> bool:
    return span.outcome == "info" and span.error == CLIENT_CLOSED


def _resent(before: Span, span: Span) -> bool:
    """``span`` goes on with ``before``: that ended unanswered, not by the client, before it began."""
    return (
        before.outcome == "info"
        and not _closed_by_client(before)
        and before.ended is not None
        and before.ended <= span.began
    )


def _ending_from(observation: Observation, ended: float) -> float:
    """From this moment a close may be the collection's end, not the collector giving up on a row:
    a raise, a cut or a cancel closes what was in flight. A collection that returned closed
    nothing on its way out (what it left running the harness closes: ``_left_running``)."""
    if observation.raised is None and not observation.timed_out:
        return math.inf  # the layer may see a row's close just after the collection returned
    cancels = [
        event.t
        for event in observation.history.events(source="fault", op="inject")
        if event.data.get("fault") == "cancel" and event.t <= ended
    ]
    return min([ended - GRACE_S, *cancels])


def _left_running(observation: Observation) -> set[int]:
    """The rows a returned collection did not hand back: left running, closed by the harness."""
    if observation.rollouts is None:
        return set()
    handed_back = {rollout.row_index for rollout in observation.rollouts if rollout is not None}
    return set(observation.requested) - handed_back


def _network_faults(history: History) -> list[tuple[float, float]]:
    """When a fault on the network (a Toxiproxy proxy's toxic or its cut, a partition) was on,
    each window running on ``GRACE_S`` past its heal (to the end of time if never healed): it
    closes connections of its own."""
    on: dict[tuple[object, object], float] = {}
    windows = []
    for event in history.events(source="fault"):
        key = (event.data.get("fault"), event.data.get("target"))
        if event.op == "inject" and ("proxy" in event.data or "links" in event.data):
            on[key] = event.t
        elif event.op == "heal" and key in on:
            windows.append((on.pop(key), event.t + GRACE_S))
    return windows + [(since, math.inf) for since in on.values()]
