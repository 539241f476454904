"""``root_cause_visible``: what the trainer sees names the root cause, never a bare CancelledError.

The one bare ``CancelledError`` that hides nothing is the caller's own: when the collection was
cancelled from outside (the ``cancel`` fault), raising it is what ``cancel_honoured`` asks for.
A raise that fails the batch for its failed rows alone (more than ``max_aborted_fraction``, no
other batch-level cause: ``raise_has_cause``) speaks for them, so its cause chain must name at
least one of their recorded causes, not only how many failed (NeMo RL #2367: an empty generation
reported as a context overflow). An aborted rollout's ``error`` must name what the History
recorded as that row's failure
(``causes.row_causes``: the HTTP status and a word of the body, the cut connection, the client's
deadline with its seconds, the fault's kind); a text that names none of them ("row 3 aborted")
fails, with the recorded causes as evidence. A row with no recorded failure needs an error
that names something. A collection that neither raised nor aborted a rollout showed no
failure to name: NOT_JUDGED.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict
from pytest_rollout_chaos.invariants.causes import row_causes
from pytest_rollout_chaos.invariants.raise_has_cause import rows_alone_failed
from pytest_rollout_chaos.invariants.rules import chain, hides_root_cause, informative


class RootCauseVisible:
    name: ClassVar[str] = "root_cause_visible"

    def check(self, observation: Observation) -> Verdict:
        raised = observation.raised
        if isinstance(raised, asyncio.CancelledError) and cancelled_from_outside(observation):
            return verdict(
                self.name,
                Status.PASS,
                "the collection was cancelled from outside (the cancel fault): its caller knows the cause",
            )
        if raised is not None:
            links = list(chain(raised))
            if hides_root_cause(raised):
                return verdict(
                    self.name,
                    Status.FAIL,
                    story(
                        observation,
                        what=(
                            f"the root cause is hidden: the collector raised {type(raised).__name__} "
                            f"{str(raised)!r} with nothing informative in its cause chain"
                        ),
                        expected="an exception whose message names what failed (server, row, status)",
                    ),
                    [f"{type(link).__name__}: {link!s}" for link in links],
                )
            unnamed = _rows_unnamed(observation, raised)
            if unnamed:
                return verdict(
                    self.name,
                    Status.FAIL,
                    story(
                        observation,
                        what=(
                            f"the collector raised {type(raised).__name__} {str(raised)[:200]!r} for its "
                            "failed rows alone, and names none of what the servers recorded as their causes"
                        ),
                        expected=(
                            "an error that fails the batch for its failed rows says why they failed (the "
                            "status and body, the exception, the deadline, the fault), not only how many"
                        ),
                    ),
                    unnamed,
                )
            return verdict(self.name, Status.PASS, f"raised {type(raised).__name__}: {str(raised)[:160]}")
        if observation.rollouts is None:
            return verdict(self.name, Status.UNKNOWN, "the collector neither returned nor raised")
        aborted = [r for r in observation.rollouts if r is not None and r.status == "aborted"]
        if not aborted:
            return not_judged(
                self.name, "nothing failed: the collector raised nothing and aborted no rollout"
            )
        events = observation.history.events()
        hidden: list[str] = []
        recorded = 0
        for rollout in aborted:
            error = rollout.error
            causes = row_causes(events, rollout.row_index)
            recorded += bool(causes)
            if not informative(error):
                hidden.append(f"row {rollout.row_index}: error={error!r}")
            elif causes and not any(cause.named_by(str(error)) for cause in causes):
                seen = "; ".join(dict.fromkeys(cause.describe for cause in causes))
                claim = f"row {rollout.row_index}: error={error!r}"
                hidden.append(f"{claim} names none of what was recorded: {seen}")
        if hidden:
            return verdict(
                self.name,
                Status.FAIL,
                story(
                    observation,
                    what=f"{len(hidden)} aborted rollouts do not name their root cause",
                    expected=(
                        "every aborted rollout's error names what the servers recorded as its row's "
                        "failure: the HTTP status and the body, the exception, the deadline and its "
                        "seconds, the fault"
                    ),
                ),
                hidden,
            )
        return verdict(
            self.name,
            Status.PASS,
            f"each of {len(aborted)} aborted rollouts names its cause ({recorded} held against their "
            "row's recorded failure)",
        )


def _rows_unnamed(observation: Observation, raised: BaseException) -> list[str]:
    """What the servers recorded as the failed rows' causes, when those rows alone explain the raise
    (``raise_has_cause.rows_alone_failed``) and its cause chain names none of them; else []."""
    failed = rows_alone_failed(observation)
    events = observation.history.events()
    causes = [(row, cause) for row in sorted(failed) for cause in row_causes(events, row)]
    text = " ".join(str(link) for link in chain(raised))
    if not causes or any(cause.named_by(text) for _, cause in causes):
        return []
    return [f"row {row}: {cause.describe}" for row, cause in causes][:8]


def cancelled_from_outside(observation: Observation) -> bool:
    """True when the History shows the ``cancel`` fault cancelled the collection."""
    return any(
        event.data.get("fault") == "cancel" and event.data.get("cancelled")
        for event in observation.history.events(source="fault", op="inject")
    )
