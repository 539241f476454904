"""``quiet_after_end``: once ``collect`` has returned or raised, the collector sends nothing more.

slime's ``gather`` without isolation raised while the sibling samples kept running, detached:
they went on calling the agents and the policy after the step had failed, for a batch nobody
would read, and kept the servers busy for the next one. So nothing the collector starts may
come after the collection ended (``sends.sent_after``: the Gym client's own record of each
``/run`` it started or refused once closed, and the fault layer's record of the collector's
links). NeMo Gym's transport resending a ``/run`` the server never answered is not the
collector's doing and is left out. What is seen depends on how long the run keeps watching
after the end (until it closes the Gym client, and while requests are in flight), so a PASS
says nothing was seen in that time.
"""

from __future__ import annotations

from typing import ClassVar

from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    rollouts_to_judge,
    story,
    verdict,
)
from pytest_rollout_chaos.invariants.sends import sent_after


class QuietAfterEnd:
    name: ClassVar[str] = "quiet_after_end"

    def check(self, observation: Observation) -> Verdict:
        ended = observation.ended_at
        if ended is None:
            return verdict(self.name, Status.UNKNOWN, "when the collection ended is unknown")
        unfinished = verdict(self.name, Status.UNKNOWN, "the collection never ended")
        judged = rollouts_to_judge(observation, self.name, raised=None, unfinished=unfinished)
        if isinstance(judged, Verdict):  # a raise ended it too: what was sent after it is judged
            return judged
        late = sent_after(observation.history, ended)
        if not late:
            return verdict(self.name, Status.PASS, "the collector sent nothing after the collection ended")
        rows = sorted({sent.row for sent in late if sent.row is not None})
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"the collector kept working after the collection ended: it started {len(late)} "
                    "requests after it" + (f" (rows {rows})" if rows else "")
                ),
                expected=(
                    "every request of the collection cancelled or finished before collect returns or raises; "
                    "nothing left running detached"
                ),
            ),
            [f"+{sent.t - ended:.2f}s after the end, {sent.line}" for sent in late],
        )
