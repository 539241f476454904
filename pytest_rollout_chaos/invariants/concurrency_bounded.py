"""``concurrency_bounded``: the collector never has more ``/run`` requests in flight than its limit.

A trainer sizes its collector's concurrency to what the agents, the sandboxes and the policy can
hold (NeMo Gym's ``num_samples_in_parallel``, NeMo RL's semaphore over ``run_examples``). A permit
given back twice on a retry path, or a retry sent outside the permit, raises the real limit with
every retry: the servers meet more requests than they were sized for, and under load they fail
rows or fall over. Nothing else shows it, since the rows still come back. The judge is the fault
layer's record of the ``/run`` requests the collector sent itself (``sends.collector_sends``: the
transport's resends of an unanswered request are not the collector's), each from its ``invoke``
to its answer; the most that overlap must not exceed the limit the collector declares it keeps
(``collector.abilities.concurrency_limit``). A request answered after the collector's own request
deadline counts until that deadline, when the collector gave up on it and its permit went to the
next row (the server may still be working on it, which no client can stop); one that ended with
no answer (a hang cut, a reset) counts only at its start, since the layer sees the cut later than
the collector gives up. NOT_JUDGED where the collector declares no limit, in native style
(its requests go to the policy, which the limit does not bound), and where there are no more rows
than the limit (nothing could exceed it); a collector that declares it keeps its own
(``own_concurrency``) is not judged by it at all (``engine.fit.inapplicable``).
"""

from __future__ import annotations

from typing import ClassVar, Final

from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict
from pytest_rollout_chaos.invariants.sends import RUN_OP, Span, collector_sends, spans

SHOWN: Final = 5  # the requests the evidence lists
UNDECLARED: Final = (
    "the collector declares no limit on the rows it keeps in flight: neither honours_max_concurrency = "
    "True (it keeps settings.max_concurrency) nor own_concurrency = why (it keeps another, or none)"
)
# The layer sees a request a little after the collector sends it; a request given up at its
# deadline must not overlap the one its permit goes to next by that lag.
GIVE_UP_SLACK_S: Final = 0.1


class ConcurrencyBounded:
    name: ClassVar[str] = "concurrency_bounded"

    def check(self, observation: Observation) -> Verdict:
        limit = observation.max_concurrency
        if limit is None:
            return not_judged(self.name, UNDECLARED)
        if observation.style != "gym":
            return not_judged(self.name, "native style: the collector's requests go to the policy")
        if len(observation.rows) <= limit:
            return not_judged(
                self.name, f"{len(observation.rows)} rows and a limit of {limit}: nothing could exceed it"
            )
        runs = [span for span in collector_sends(spans(observation.history)) if span.op == RUN_OP]
        if not runs:
            return not_judged(self.name, "the fault layer saw no /run request from the collector")
        most, at = most_at_once(runs, observation.request_timeout_s)
        if most <= limit:
            return verdict(
                self.name,
                Status.PASS,
                f"at most {most} of {len(runs)} /run requests in flight at once (limit {limit})",
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"{most} /run requests were in flight at once, above the collector's max_concurrency="
                    f"{limit}"
                ),
                expected=f"at most {limit} rows in flight at any moment, retries included",
            ),
            [_describe(span, observation.history.t0) for span in at[:SHOWN]],
        )


def most_at_once(runs: list[Span], request_timeout_s: float | None = None) -> tuple[int, list[Span]]:
    """The most requests in flight at one moment, and those requests (in the order they began)."""
    most: list[Span] = []
    for span in runs:  # the most overlap is reached when some request begins
        open_now = [other for other in runs if other.began <= span.began < _end(other, request_timeout_s)]
        if len(open_now) > len(most):
            most = open_now
    return len(most), most


def _end(span: Span, request_timeout_s: float | None) -> float:
    """Until when ``span`` counts: its answer, or only its start when it ended with none; never past
    the collector's own request deadline (less ``GIVE_UP_SLACK_S``), when it has given up on it."""
    if not span.answered or span.ended is None:
        return span.began + 1e-9
    if request_timeout_s is None:
        return span.ended
    return min(span.ended, span.began + request_timeout_s - GIVE_UP_SLACK_S)


def _describe(span: Span, t0: float) -> str:
    row = f"row {span.row}" if span.row is not None else "row ?"
    ended = f"answered {span.status}" if span.answered else "no answer"
    return f"t={span.began - t0:.3f}s {span.link} {span.op} ({row}, {ended})"
