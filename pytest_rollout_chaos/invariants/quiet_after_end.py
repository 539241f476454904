"""``quiet_after_end``: once ``collect`` has returned or raised, the collector sends nothing more.

slime's ``gather`` without isolation raised while the sibling samples kept running, detached:
they went on calling the agents and the policy after the step had failed, for a batch nobody
would read, and kept the servers busy for the next one. So after the collection ended, no new
request of the collector may reach a server (the fault layer's record of its ``collector->``
links; a request that arrives within ``GRACE_S`` was sent before the end), and nothing may call
the Gym client once the run has closed it (its ``run_examples_after_close`` record, which
catches detached work at once, whatever the timing). NeMo Gym's transport resending a ``/run``
the server never answered is not the collector's doing and is left out (``sends``). What the
layer sees depends on how long the harness keeps watching after the end, so a PASS says nothing
was seen in that time.
"""

from __future__ import annotations

from typing import ClassVar, Final

from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, story, verdict
from pytest_rollout_chaos.invariants.sends import collector_sends, spans

GRACE_S: Final = 0.5
AFTER_CLOSE: Final = "run_examples_after_close"  # the Gym client's record of a call it refused


class QuietAfterEnd:
    name: ClassVar[str] = "quiet_after_end"

    def check(self, observation: Observation) -> Verdict:
        ended = observation.ended_at
        if ended is None:
            return verdict(self.name, Status.UNKNOWN, "when the collection ended is unknown")
        if observation.rollouts is None and observation.raised is None:
            return verdict(self.name, Status.UNKNOWN, "the collection never ended")
        history = observation.history
        t0 = history.t0
        late = [span for span in collector_sends(spans(history)) if span.began > ended + GRACE_S]
        refused = history.events(source="collector", op=AFTER_CLOSE)
        if not late and not refused:
            return verdict(self.name, Status.PASS, "the collector sent nothing after the collection ended")
        rows = sorted({span.row for span in late if span.row is not None})
        rows = sorted({*rows, *(row for event in refused for row in event.data.get("rows") or ())})
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"the collector kept working after the collection ended: {len(late)} requests reached "
                    f"the servers after it and {len(refused)} more calls came to the closed Gym client"
                    + (f" (rows {rows})" if rows else "")
                ),
                expected=(
                    "every request of the collection cancelled or finished before collect returns or raises; "
                    "nothing left running detached"
                ),
            ),
            [f"+{span.began - ended:.2f}s after the end: {span.invoke.describe(t0)}" for span in late]
            + [f"+{event.t - ended:.2f}s after the end: {event.describe(t0)}" for event in refused],
        )
