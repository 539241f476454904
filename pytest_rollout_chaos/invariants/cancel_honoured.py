"""``cancel_honoured``: a collection cancelled from outside ends with ``CancelledError``, at once, quietly.

A trainer cancels its rollout task on a step timeout, a preemption or Ctrl-C. A collector that
catches ``BaseException`` per row turns that into a retry: it keeps sending ``/run`` for a step
nobody waits for, or returns rollouts as if nothing happened. When the History shows the
``cancel`` fault cancelled the collection, the collector must have raised ``CancelledError``
itself (not swallowed it, not wrapped it in another error), within ``BOUND_S`` of the cancel,
and started no request after it (``sends.sent_after``; NeMo Gym's transport resending an
unanswered ``/run`` is left out). Without an outside
cancellation there is nothing to judge: NOT_JUDGED.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar, Final

from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict
from pytest_rollout_chaos.invariants.sends import sent_after

BOUND_S: Final = 3.0


class CancelHonoured:
    name: ClassVar[str] = "cancel_honoured"

    def check(self, observation: Observation) -> Verdict:
        history = observation.history
        cancels = [
            event
            for event in history.events(source="fault", op="inject")
            if event.data.get("fault") == "cancel" and event.data.get("cancelled")
        ]
        if not cancels:
            return not_judged(self.name, "nobody cancelled the collection from outside")
        cancelled_at = cancels[0].t
        ended = observation.ended_at
        if ended is None:
            return verdict(self.name, Status.UNKNOWN, "when the collection ended is unknown")
        t0 = history.t0
        problems = []
        raised = observation.raised
        if observation.timed_out:
            problems.append("the collection never ended after the cancel")
        elif raised is None:
            count = len(observation.rollouts or ())
            problems.append(f"the collector swallowed the cancellation and returned {count} rollouts")
        elif not isinstance(raised, asyncio.CancelledError):
            problems.append(f"the collector raised {type(raised).__name__}: {raised}, not CancelledError")
        took = ended - cancelled_at
        if took > BOUND_S:
            problems.append(f"it ended {took:.2f}s after the cancel (allowed: {BOUND_S:g}s)")
        late = sent_after(history, cancelled_at)
        if late:
            rows = sorted({sent.row for sent in late if sent.row is not None})
            problems.append(
                f"it sent {len(late)} requests after the cancel" + (f" (rows {rows})" if rows else "")
            )
        if not problems:
            return verdict(
                self.name,
                Status.PASS,
                f"cancelled at t={cancelled_at - t0:.2f}s, the collector raised CancelledError "
                f"{took:.2f}s later and sent nothing after it",
            )
        evidence = [f"+{sent.t - cancelled_at:.2f}s after the cancel, {sent.line}" for sent in late]
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what="the outside cancellation was not honoured: " + "; ".join(problems),
                expected=(
                    f"CancelledError out of collect within {BOUND_S:g}s of the cancel, every row's work "
                    "cancelled with it, and no request sent afterwards"
                ),
            ),
            evidence[:12],
        )
