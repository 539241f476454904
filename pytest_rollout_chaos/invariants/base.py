"""What an invariant sees and says: ``Observation`` in, ``Verdict`` out; the ``Checker`` contract.

An invariant judges only from the History, the requested rows, what the collector returned or
raised, and the timing; it never touches a server (faults inject, checkers judge). A checker
returns a Verdict and never raises; ``compose.check_all`` turns one that does into UNKNOWN. One
that finds nothing of what it judges returns NOT_JUDGED with the reason (``not_judged``), never a
PASS over nothing: a raise, which hands the trainer nothing, is judged.
The helpers here write the shared parts of a failure story: what was requested, what the
faults did and when, and what came back.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pytest_rollout_chaos.collector.protocol import Mode, Rollout, Row, Style, row_index
from pytest_rollout_chaos.history import Event, History

EVIDENCE_LIMIT = 12


class Status(enum.Enum):
    """Worst first when sorted by ``rank``: FAIL beats UNKNOWN beats NOT_JUDGED beats PASS.

    Jepsen's merge, with one more state below UNKNOWN: NOT_JUDGED is an invariant that found
    nothing of what it judges (no failure to isolate, no multi-turn rollout, no server record),
    and says why. It is no evidence against the collector, so it ranks under UNKNOWN; it is no
    evidence for it either, so a merge that holds one is never PASS. Whether it fails a scenario
    is the scenario's call: a listed invariant that was not judged makes it vacuous.
    """

    PASS = "PASS"
    NOT_JUDGED = "NOT_JUDGED"
    UNKNOWN = "UNKNOWN"
    FAIL = "FAIL"

    @property
    def rank(self) -> int:
        return {"PASS": 0, "NOT_JUDGED": 1, "UNKNOWN": 2, "FAIL": 3}[self.value]


@dataclass(frozen=True, slots=True)
class Verdict:
    """One invariant's judgement: a status, one summary paragraph, and evidence lines."""

    name: str
    status: Status
    summary: str
    evidence: tuple[str, ...] = ()

    def render(self) -> str:
        lines = [f"{self.name}: {self.status.value}: {self.summary}"]
        lines += [f"    {line}" for line in self.evidence[:EVIDENCE_LIMIT]]
        if len(self.evidence) > EVIDENCE_LIMIT:
            lines.append(f"    ... {len(self.evidence) - EVIDENCE_LIMIT} more")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class FollowUp:
    """One collection after the first on the same collector (``workload.collections``): its
    number (2 for the first follow-up), the rows handed over (a copy), what came back or was
    raised, whether it was cut at ``deadline_s``, and when it started and how long it took
    (``time.monotonic()``, the History's clock)."""

    number: int
    rows: Sequence[Row]
    rollouts: Sequence[Rollout | None] | None
    raised: BaseException | None
    timed_out: bool
    started_at: float
    elapsed_s: float
    deadline_s: float


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything an invariant may look at; ``rollouts`` is None when the collector raised.

    ``timed_out`` is set by whoever ran the collection when it had to cut it at the deadline.
    ``started_at`` (``time.monotonic()``, the History's clock) is when ``collect`` was called, so
    ``ended_at`` places the outcome among the events; ``request_timeout_s``, ``max_attempts`` and
    ``collect_timeout_s`` are the limits the collector was given (``CollectorSettings``); None
    where unknown. ``generations_per_prompt`` is the workload's GRPO group size: the rows are laid
    out prompt by prompt, so each run of that many consecutive rows is one group. ``rows`` are the
    rows as they were handed over (a copy taken before ``collect``), ``rows_after`` the caller's
    own after it. ``follow_ups`` are the collections after the first (``workload.collections``);
    the rest of the Observation, its History included, is the first collection's alone.
    """

    rows: Sequence[Row]
    rollouts: Sequence[Rollout | None] | None
    raised: BaseException | None
    history: History
    deadline_s: float
    elapsed_s: float
    mode: Mode = "train"
    max_aborted_fraction: float = 0.5
    timed_out: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    started_at: float | None = None
    request_timeout_s: float | None = None
    max_attempts: int | None = None
    collect_timeout_s: float | None = None
    generations_per_prompt: int = 1
    rows_after: Sequence[Row] | None = None  # the rows as ``collect`` left them; None: not kept
    style: Style = "gym"
    max_concurrency: int | None = None  # the rows the collector declares it keeps in flight at most
    follow_ups: Sequence[FollowUp] = ()

    @property
    def requested(self) -> list[int]:
        return [row_index(row, position) for position, row in enumerate(self.rows)]

    @property
    def ended_at(self) -> float | None:
        """When the collection returned, raised or was cut (History time); None if unknown."""
        return None if self.started_at is None else self.started_at + self.elapsed_s


class Checker(Protocol):
    """An invariant: a name from ARCHITECTURE.md#history-and-invariants and a pure ``check``."""

    name: ClassVar[str]

    def check(self, observation: Observation) -> Verdict: ...


def verdict(name: str, status: Status, summary: str, evidence: Sequence[str] = ()) -> Verdict:
    return Verdict(name, status, summary, tuple(evidence))


def not_judged(name: str, reason: str) -> Verdict:
    """The verdict of an invariant that found nothing of what it judges: NOT_JUDGED, and why."""
    return Verdict(name, Status.NOT_JUDGED, reason)


def rollouts_to_judge(
    observation: Observation, name: str, *, raised: str | None, unfinished: Verdict | None = None
) -> Sequence[Rollout | None] | Verdict:
    """What the collector returned, or the verdict when it returned nothing.

    Written once so that every invariant reads a missing result alike. A raise failed loudly and
    handed the trainer nothing, so it is PASS with ``raised`` as the summary; with ``raised=None``
    the invariant judges the raise itself and gets no rollouts. A collection that neither returned
    nor raised (cut at the deadline; ``bounded`` judges that) is UNKNOWN, or ``unfinished``.
    """
    if observation.rollouts is not None:
        return observation.rollouts
    if observation.raised is not None:
        return () if raised is None else verdict(name, Status.PASS, raised)
    if unfinished is not None:
        return unfinished
    return verdict(name, Status.UNKNOWN, "the collector neither returned nor raised")


def turns_handed_on(observation: Observation, name: str, what: str) -> list[Rollout] | Verdict:
    """The rollouts that hand back turns to train on, or the verdict when there are none to judge:
    PASS when the collector raised (no ``what`` reached the trainer), UNKNOWN when it neither
    returned nor raised, NOT_JUDGED when no rollout hands back turns."""
    rollouts = rollouts_to_judge(
        observation, name, raised=f"the collector raised; no {what} reached the trainer"
    )
    if isinstance(rollouts, Verdict):
        return rollouts
    claimed = [r for r in rollouts if r is not None and r.status != "aborted" and r.turns]
    if not claimed:
        return not_judged(name, "no rollout hands back turns to train on")
    return claimed


def requested_text(observation: Observation) -> str:
    return f"requested {len(observation.rows)} rows ({observation.mode})"


def outcome_text(observation: Observation) -> str:
    """What came back: an exception, or counts of rollouts by status."""
    if observation.raised is not None:
        message = str(observation.raised).strip()
        name = type(observation.raised).__name__
        return f"the collector raised {name}: {message}" if message else f"the collector raised a bare {name}"
    if observation.rollouts is None:
        return "the collector returned nothing and raised nothing (it never finished)"
    counts = Counter("None" if r is None else r.status for r in observation.rollouts)
    parts = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    return f"the collector returned {len(observation.rollouts)} rollouts ({parts or 'empty'})"


def fault_events(history: History) -> list[Event]:
    return history.events(source="fault")


def faults_text(history: History) -> str:
    """``fault kill on agent-0 injected at t=1.20s, healed at t=3.00s`` lines, or 'no fault'."""
    events = fault_events(history)
    if not events:
        return "no fault was injected"
    parts = []
    for event in events:
        at = f"at t={event.t - history.t0:.2f}s"
        if "fault" not in event.data:  # a fact about a server, such as a restart after a heal
            parts.append(f"{event.op} of {event.data.get('server', 'a server')} {at}")
            continue
        parts.append(f"{event.op} {event.data['fault']} on {event.data.get('target', '?')} {at}")
    return "faults: " + "; ".join(parts)


def story(observation: Observation, *, what: str, expected: str) -> str:
    """The summary of a FAIL: requested, fault, what came back, what the invariant expected."""
    return (
        f"{what}. The test {requested_text(observation)}; {faults_text(observation.history)}; "
        f"{outcome_text(observation)}. Expected: {expected}."
    )


def describe(events: Sequence[Event], history: History) -> list[str]:
    return [event.describe(history.t0) for event in events]
