"""``ScenarioResult``: what happened in one run of a scenario.

The engine (``run``) fills it in; pytest's side stashes it on the scenario's item under
``report.reports.RESULT_KEY``, where the reports and the JUnit properties read it. It is data, so
they depend on it and not on the runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.engine.acted import Touches
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import FollowUp, Status, Verdict
from pytest_rollout_chaos.invariants.witnesses import Sighting
from pytest_rollout_chaos.scenario.model import FaultStep, Scenario


@dataclass
class ScenarioResult:
    """What happened in one run of a scenario, for judging and for the reports."""

    scenario: Scenario
    rows: list[dict[str, Any]]  # as handed to collect (a copy taken before)
    history: History
    rows_after: list[dict[str, Any]] | None = None  # the rows collect was given, as it left them
    concurrency_limit: int | None = None  # the rows the collector declares it keeps in flight at most
    # the invariants that do not apply to the collector by what it declares -> why (``fit.inapplicable``)
    not_applicable: dict[str, str] = field(default_factory=dict)
    rollouts: list[Rollout] | None = None
    raised: BaseException | None = None
    timed_out: bool = False
    started_at: float | None = None  # time.monotonic() when collect was called
    elapsed_s: float = 0.0
    faults_injected: int = 0
    fault_errors: list[BaseException] = field(default_factory=list)
    unfired: list[FaultStep] = field(default_factory=list)
    touches: list[Touches] = field(default_factory=list)  # what each injected fault touched
    unacted: list[str] = field(default_factory=list)  # faults that touched not what their step said
    verdicts: list[Verdict] = field(default_factory=list)
    expectation_failures: list[str] = field(default_factory=list)
    witnesses: list[Sighting] = field(default_factory=list)  # what ``expect.witness`` asked to see
    vacuous: list[str] = field(default_factory=list)  # listed invariants not judged, witnesses not seen
    # each name the scenario and its events give a server -> its processes' names (for their logs)
    servers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the collections after the first (``workload.collections``), and when the History the
    # invariants of the first read ends (None: at the end, as with one collection)
    follow_ups: list[FollowUp] = field(default_factory=list)
    judged_until: float | None = None
    earlier_draws: list[str] = field(default_factory=list)  # why each earlier run tested nothing

    def judged_history(self) -> History:
        """The History of the first collection: all of it, or up to ``judged_until`` where later
        collections on the same collector sent requests for the same rows."""
        return self.history if self.judged_until is None else self.history.until(self.judged_until)

    @property
    def passed(self) -> bool:
        """No miss, no fault error, nothing vacuous, and every verdict PASS or NOT_JUDGED (a listed
        NOT_JUDGED the scenario does not excuse is in ``vacuous``)."""
        return (
            not self.expectation_failures
            and not self.fault_errors
            and not self.vacuous
            and all(verdict.status in (Status.PASS, Status.NOT_JUDGED) for verdict in self.verdicts)
        )

    def outcome(self) -> str:
        """One line: what the collector did."""
        if self.timed_out:
            return (
                f"the collection did not finish within {self.scenario.expect.within_s:g}s and was cancelled"
            )
        if self.raised is not None:
            return f"the collector raised {type(self.raised).__name__}: {self.raised}"
        rollouts = self.rollouts or []
        counts: dict[str, int] = {}
        for rollout in rollouts:
            status = getattr(rollout, "status", "missing") if rollout is not None else "None"
            counts[status] = counts.get(status, 0) + 1
        detail = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
        return (
            f"the collector returned {len(rollouts)} rollouts for {len(self.rows)} rows ({detail or 'none'})"
        )
