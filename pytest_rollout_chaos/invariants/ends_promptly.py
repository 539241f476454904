"""``ends_promptly``: after the last sign of progress, the collection ends within its request deadline.

``bounded`` only asks for an end before the scenario's deadline, so a collector whose one
deadline is the collection's (``collect_timeout_s``) passes it while a dead, frozen or hung
agent holds every row until then, and a short count found only at that deadline too. Here the
end is measured from the History: from the last sign of progress (the collection's start, a
fault's inject, an answer from any server, a request the collector sent) to the moment ``collect``
returned or raised. A request for no row (a health check, a probe of a stuck server) counts
only by its answer. A row's ``/run`` counts once, when it was first sent: sending it again,
whether NeMo Gym's transport resends an unanswered one (``sends``) or the collector itself
re-sends it after its deadline, is no progress, so the clock runs from the moment the row's
first ``/run`` stopped making progress, and a collector that retries a dead agent past its own
deadline is late. Where a request was left without an answer (cut, refused, or still open at
the end), the collector may wait out its own ``request_timeout_s`` plus a margin; where every
request was answered, nothing is left to wait for and the margin alone is allowed.
"""

from __future__ import annotations

from typing import ClassVar, Final

from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    rollouts_to_judge,
    story,
    verdict,
)
from pytest_rollout_chaos.invariants.sends import RUN_OP, Span, collector_sends, spans

MARGIN_MIN_S: Final = 3.0
MARGIN_SHARE: Final = 0.25  # of request_timeout_s


def margin_s(request_timeout_s: float) -> float:
    """Slack for scheduling and the collector's own bookkeeping."""
    return max(MARGIN_MIN_S, MARGIN_SHARE * request_timeout_s)


class EndsPromptly:
    name: ClassVar[str] = "ends_promptly"

    def check(self, observation: Observation) -> Verdict:
        ended, timeout_s = observation.ended_at, observation.request_timeout_s
        if observation.started_at is None or ended is None or timeout_s is None:
            return verdict(
                self.name,
                Status.UNKNOWN,
                "when the collection started and the collector's request_timeout_s are unknown",
            )
        judged = rollouts_to_judge(observation, self.name, raised=None)  # a raise ended it too
        if isinstance(judged, Verdict) and not observation.timed_out:  # a cut run is judged: it waited
            return judged
        history = observation.history
        requests = [span for span in spans(history) if span.began <= ended]
        last, what = _last_progress(observation.started_at, ended, requests, history.events(source="fault"))
        unanswered = [
            span for span in requests if span.outcome == "info" or span.ended is None or span.ended > ended
        ]
        margin = margin_s(timeout_s)
        allowed = timeout_s + margin if unanswered else margin
        waited = ended - last
        t0 = history.t0
        if not observation.timed_out and waited <= allowed:
            return verdict(
                self.name,
                Status.PASS,
                f"ended {waited:.2f}s after the last progress ({what} at t={last - t0:.2f}s), "
                f"within {allowed:.2f}s",
            )
        if unanswered:
            why = (
                f"{len(unanswered)} requests were left without an answer, so up to request_timeout_s="
                f"{timeout_s:g} plus a {margin:.2f}s margin was allowed"
            )
        else:
            why = f"every request was answered, so nothing was left to wait for beyond a {margin:.2f}s margin"
        evidence = [f"last progress: {what} at t={last - t0:.2f}s", f"end: t={ended - t0:.2f}s"]
        evidence += [f"unanswered: {span.invoke.describe(t0)}" for span in unanswered[-6:]]
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"the collector noticed late: it ended {waited:.2f}s after the last progress, where "
                    f"{allowed:.2f}s were allowed ({why})"
                    if not observation.timed_out
                    else f"the collection never ended ({waited:.2f}s after the last progress)"
                ),
                expected=(
                    "a dead, frozen or hung server noticed at the collector's own request deadline (a row's "
                    "re-sent /run buys no time), and a short count or a failed batch at once, not at the "
                    "collection deadline"
                ),
            ),
            evidence,
        )


def _last_progress(
    started: float, ended: float, requests: list[Span], faults: list[Event]
) -> tuple[float, str]:
    """The latest sign of progress before ``ended``, and what it was."""
    marks: list[tuple[float, str]] = [(started, "the collection's start")]
    marks += [
        (event.t, f"{event.data.get('fault', 'a fault')} injected")
        for event in faults
        if event.op == "inject" and event.t <= ended
    ]
    marks += [
        (span.ended, f"an answer to {span.op} on {span.link}")
        for span in requests
        if span.answered and span.ended is not None and span.ended <= ended
    ]
    marks += [(span.began, f"the collector sending {span.op}") for span in first_sends(requests)]
    return max(marks, key=lambda mark: mark[0])


def first_sends(requests: list[Span]) -> list[Span]:
    """The collector's own requests for a row, less every ``/run`` of a row that was sent before.

    A request for no row (a health check, a probe of a stuck server) moves nothing forward by
    being sent: it counts only by its answer, like any other.
    """
    sent_rows: set[int] = set()
    first = []
    for span in collector_sends(requests):
        if span.row is None:
            continue
        if span.op == RUN_OP:
            if span.row in sent_rows:
                continue  # the row's re-send: the same work again, not progress
            sent_rows.add(span.row)
        first.append(span)
    return first
