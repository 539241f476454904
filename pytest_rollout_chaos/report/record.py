"""What the reports keep of each scenario item, as plain data that can cross a process boundary.

A ``ScenarioRecord`` holds the pytest outcome of one scenario item, the facts of its YAML file
(``ScenarioFacts``) and of its run (``ResultFacts``), and its History events. It is built from
the live ``Scenario`` and ``ScenarioResult`` when the item ends, and it turns into JSON and back
(``to_wire`` / ``from_wire``), so that pytest-xdist workers can send their records to the
controller through ``config.workeroutput`` and one report covers the whole run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.report import timeline as tl

if TYPE_CHECKING:
    from pytest_rollout_chaos.engine.result import ScenarioResult
    from pytest_rollout_chaos.invariants.base import FollowUp
    from pytest_rollout_chaos.scenario.model import Scenario

ItemOutcome = Literal["passed", "failed", "error", "skipped"]
VerdictStatus = Literal["PASS", "NOT_JUDGED", "FAIL", "UNKNOWN"]


@dataclass(frozen=True, slots=True)
class VerdictFacts:
    """One invariant's verdict: name, PASS / NOT_JUDGED / FAIL / UNKNOWN, summary and evidence lines."""

    name: str
    status: VerdictStatus
    summary: str
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FaultFacts:
    """One injected fault: its kind and target, its step's line, when it was on, and what it touched.

    Times are seconds since the History's ``t0``; ``healed_at_s`` is None for a fault never healed.
    """

    kind: str
    target: str
    line: int
    fault: str  # "latency(latency_ms=200) on agent->model"
    injected_at_s: float
    healed_at_s: float | None
    touched: int
    counted: str  # what ``touched`` counts: "requests on agent->model while it was on", ...


@dataclass(frozen=True, slots=True)
class ScenarioFacts:
    """What the reports show of a scenario file: where it is, what it models, its fault steps."""

    path: str
    line: int
    description: str
    tags: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()
    fault_steps: tuple[str, ...] = ()  # "latency(latency_ms=200) on agent->model at start"
    within_s: float = 0.0

    @classmethod
    def of(cls, scenario: Scenario) -> ScenarioFacts:
        return cls(
            path=str(scenario.path),
            line=scenario.line,
            description=scenario.description.strip(),
            tags=tuple(scenario.tags),
            upstream=tuple(scenario.upstream),
            fault_steps=tuple(step.describe() for step in scenario.faults),
            within_s=scenario.expect.within_s,
        )


@dataclass(frozen=True, slots=True)
class FollowUpFacts:
    """One collection after the first on the same collector (``workload.collections``): how it
    ended (``returned``, ``raised`` or ``cut`` at the deadline) and what came back."""

    number: int
    rows: int
    ended: Literal["returned", "raised", "cut"]
    raised: str | None  # ``Type: message`` when it raised
    statuses: Mapping[str, int]  # the rollouts it returned, counted by status (``None`` for a hole)
    elapsed_s: float

    @classmethod
    def of(cls, follow_up: FollowUp) -> FollowUpFacts:
        statuses: dict[str, int] = {}
        for rollout in follow_up.rollouts or ():
            status = "None" if rollout is None else str(rollout.status)
            statuses[status] = statuses.get(status, 0) + 1
        ended: Literal["returned", "raised", "cut"] = (
            "cut" if follow_up.timed_out else "raised" if follow_up.raised is not None else "returned"
        )
        raised = follow_up.raised
        return cls(
            number=follow_up.number,
            rows=len(follow_up.rows),
            ended=ended,
            raised=None if raised is None else f"{type(raised).__name__}: {raised}",
            statuses=dict(sorted(statuses.items())),
            elapsed_s=round(follow_up.elapsed_s, 3),
        )


@dataclass(frozen=True, slots=True)
class ResultFacts:
    """What the reports show of one run of a scenario: outcome, verdicts, and each row's fate."""

    outcome: str
    elapsed_s: float
    faults_injected: int
    passed: bool
    t0: float
    deadline_s: float
    rows: tuple[Mapping[str, Any], ...] = ()  # ``_rowidx`` and ``agent_ref.name`` of each row
    row_outcomes: Mapping[int, tl.Outcome] = field(default_factory=dict)
    verdicts: tuple[VerdictFacts, ...] = ()
    expectation_failures: tuple[str, ...] = ()
    fault_errors: tuple[str, ...] = ()
    unfired: tuple[str, ...] = ()  # fault steps the collection ended before
    unacted: tuple[str, ...] = ()  # faults that touched not what their step said
    touches: tuple[str, ...] = ()  # ``latency(...) on agent->model: 12 requests on ...`` per fault
    faults: tuple[FaultFacts, ...] = ()  # the same, as data
    witnesses: tuple[str, ...] = ()  # ``prompt_ids_drifted: seen 3 (at least 1): ...`` per witness
    vacuous: tuple[str, ...] = ()  # listed invariants not judged, witnesses not seen
    earlier_draws: tuple[str, ...] = ()  # why each run before this one tested nothing (redrawn)
    # What an adapter gave upstream, one entry per collection (``adapters.trainer_settings``):
    # ``{"trainer": ..., "mode": ..., "settings": [{"key", "value", "source", "where"}, ...]}``
    trainer_settings: tuple[Mapping[str, Any], ...] = ()
    # What an adapter ran of the trainer's code (``adapters.upstream_calls.summary``): ``read_out``,
    # ``calls`` (each with its outcome and stand-ins), ``stood_in`` and ``gym_clients``; ``{}`` if none
    upstream_run: Mapping[str, Any] = field(default_factory=dict)
    follow_ups: tuple[FollowUpFacts, ...] = ()  # the collections after the first, in order

    @classmethod
    def of(cls, result: ScenarioResult) -> ResultFacts:
        from pytest_rollout_chaos.collector.adapters import upstream_calls
        from pytest_rollout_chaos.collector.adapters.trainer_settings import recorded
        from pytest_rollout_chaos.faults.apply import describe

        t0 = result.history.t0
        return cls(
            outcome=result.outcome(),
            elapsed_s=result.elapsed_s,
            faults_injected=result.faults_injected,
            passed=result.passed,
            t0=result.history.t0,
            deadline_s=result.scenario.expect.within_s,
            rows=tuple(_row_label_keys(row) for row in result.rows),
            row_outcomes=tl.row_outcomes(
                result.rows, result.rollouts, raised=result.raised is not None, timed_out=result.timed_out
            ),
            verdicts=tuple(
                VerdictFacts(v.name, v.status.value, v.summary, tuple(v.evidence)) for v in result.verdicts
            ),
            expectation_failures=tuple(result.expectation_failures),
            fault_errors=tuple(str(error) for error in result.fault_errors),
            unfired=tuple(f"line {step.line}: {step.describe()}" for step in result.unfired),
            unacted=tuple(result.unacted),
            touches=tuple(touch.describe() for touch in result.touches),
            faults=tuple(
                FaultFacts(
                    kind=touch.applied.fault.kind,
                    target=touch.applied.fault.target,
                    line=touch.applied.step.line,
                    fault=describe(touch.applied.fault),
                    injected_at_s=touch.applied.injected_at - t0,
                    healed_at_s=None if touch.applied.healed_at is None else touch.applied.healed_at - t0,
                    touched=touch.count,
                    counted=touch.counted,
                )
                for touch in result.touches
            ),
            witnesses=tuple(sighting.describe() for sighting in result.witnesses),
            vacuous=tuple(result.vacuous),
            earlier_draws=tuple(result.earlier_draws),
            trainer_settings=tuple(recorded(result.history)),
            upstream_run=upstream_calls.summary(result.history),
            follow_ups=tuple(FollowUpFacts.of(follow_up) for follow_up in result.follow_ups),
        )

    def not_passed(self) -> list[VerdictFacts]:
        """The verdicts against the collector: FAIL and UNKNOWN. A NOT_JUDGED is none: it is
        silent, or, for an invariant the scenario lists, in ``vacuous``."""
        return [verdict for verdict in self.verdicts if verdict.status in ("FAIL", "UNKNOWN")]


@dataclass(frozen=True, slots=True)
class ScenarioRecord:
    """One scenario's pytest outcome, the facts of its run when the runner got that far, and why not.

    ``events`` is the History as it was when the item ended: the History keeps following the
    servers' event files, so read later it would also hold the events of the next scenarios.
    ``worker`` is the pytest-xdist worker that ran it ("" without xdist).
    """

    nodeid: str
    name: str
    outcome: ItemOutcome
    duration_s: float
    scenario: ScenarioFacts | None = None
    result: ResultFacts | None = None
    message: str = ""
    headline: str = ""
    events: tuple[Event, ...] = ()
    worker: str = ""
    setup_s: float | None = None  # the setup phase's duration (None: not known)
    call_s: float | None = None  # the call phase's duration (None: setup ended the item)

    @property
    def faults_injected(self) -> int:
        return self.result.faults_injected if self.result is not None else 0

    @property
    def elapsed_s(self) -> float:
        """The collection's own time when known, else the whole test's."""
        return self.result.elapsed_s if self.result is not None else self.duration_s

    def to_wire(self) -> str:
        """This record as one JSON text (events as the History's own JSON lines)."""
        data = asdict(self)
        data["events"] = [event.to_json() for event in self.events]
        if self.result is not None:
            data["result"]["row_outcomes"] = [[row, fate] for row, fate in self.result.row_outcomes.items()]
        return json.dumps(data)

    @classmethod
    def from_wire(cls, text: str) -> ScenarioRecord:
        """The record ``to_wire`` wrote."""
        data = json.loads(text)
        scenario = data.get("scenario")
        result = data.get("result")
        return cls(
            nodeid=str(data["nodeid"]),
            name=str(data["name"]),
            outcome=data["outcome"],
            duration_s=float(data["duration_s"]),
            scenario=_scenario_facts(scenario) if scenario is not None else None,
            result=_result_facts(result) if result is not None else None,
            message=str(data.get("message", "")),
            headline=str(data.get("headline", "")),
            events=tuple(Event.from_json(line) for line in data.get("events", ())),
            worker=str(data.get("worker", "")),
            setup_s=_seconds(data.get("setup_s")),
            call_s=_seconds(data.get("call_s")),
        )


def _seconds(value: object) -> float | None:
    return None if value is None else float(cast(float, value))


def _row_label_keys(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """The keys of a row the timeline shows (its index and agent), not its whole prompt."""
    kept: dict[str, Any] = {}
    if "_rowidx" in row:
        kept["_rowidx"] = row["_rowidx"]
    ref = row.get("agent_ref")
    if isinstance(ref, Mapping) and isinstance(ref.get("name"), str):
        kept["agent_ref"] = {"name": ref["name"]}
    return kept


def _scenario_facts(data: Mapping[str, Any]) -> ScenarioFacts:
    return ScenarioFacts(
        path=str(data["path"]),
        line=int(data["line"]),
        description=str(data["description"]),
        tags=tuple(data.get("tags", ())),
        upstream=tuple(data.get("upstream", ())),
        fault_steps=tuple(data.get("fault_steps", ())),
        within_s=float(data.get("within_s", 0.0)),
    )


def _result_facts(data: Mapping[str, Any]) -> ResultFacts:
    return ResultFacts(
        outcome=str(data["outcome"]),
        elapsed_s=float(data["elapsed_s"]),
        faults_injected=int(data["faults_injected"]),
        passed=bool(data["passed"]),
        t0=float(data["t0"]),
        deadline_s=float(data["deadline_s"]),
        rows=tuple(data.get("rows", ())),
        row_outcomes={int(row): cast(tl.Outcome, fate) for row, fate in data.get("row_outcomes", ())},
        verdicts=tuple(_verdict_facts(verdict) for verdict in data.get("verdicts", ())),
        expectation_failures=tuple(data.get("expectation_failures", ())),
        fault_errors=tuple(data.get("fault_errors", ())),
        unfired=tuple(data.get("unfired", ())),
        unacted=tuple(data.get("unacted", ())),
        touches=tuple(data.get("touches", ())),
        faults=tuple(FaultFacts(**fault) for fault in data.get("faults", ())),
        witnesses=tuple(data.get("witnesses", ())),
        vacuous=tuple(data.get("vacuous", ())),
        earlier_draws=tuple(data.get("earlier_draws", ())),
        trainer_settings=tuple(data.get("trainer_settings", ())),
        upstream_run=dict(data.get("upstream_run", {})),
        follow_ups=tuple(FollowUpFacts(**follow_up) for follow_up in data.get("follow_ups", ())),
    )


def _verdict_facts(data: Mapping[str, Any]) -> VerdictFacts:
    return VerdictFacts(
        name=str(data["name"]),
        status=data["status"],
        summary=str(data["summary"]),
        evidence=tuple(data.get("evidence", ())),
    )
