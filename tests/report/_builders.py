"""Hand-built scenario results for the report tests: a scenario text, events at chosen times, verdicts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.history import Event, EventKind, History
from pytest_rollout_chaos.invariants.base import Status, Verdict
from pytest_rollout_chaos.report.record import ItemOutcome, ResultFacts, ScenarioFacts, ScenarioRecord
from pytest_rollout_chaos.scenario.model import Scenario, parse_scenario

T0 = 1000.0

SCENARIO = """\
name: {name}
description: {description}
tags: [network, demo]
upstream: ["NVIDIA-NeMo/Gym#1787"]
workload:
  rows_per_task: 3
faults:
  - kind: latency
    target: agent->model
    at: start
    latency_ms: 200
    duration_s: 1
expect:
  invariants: [accounted, bounded]
  within_s: 30
"""


def scenario(name: str = "slow-link", description: str = "A slow model link.") -> Scenario:
    return parse_scenario(
        SCENARIO.format(name=name, description=json.dumps(description)), Path(f"{name}.chaos.yaml")
    )


def event(t_s: float, source: str, kind: EventKind, op: str, **data: Any) -> Event:
    """An event ``t_s`` seconds after ``T0``."""
    return Event(T0 + t_s, source, kind, op, data)


def rows(count: int, agent: str = "calculator_agent") -> list[dict[str, Any]]:
    return [{"_rowidx": index, "agent_ref": {"name": agent}} for index in range(count)]


def story_events(*, lose_row: int | None = None) -> list[Event]:
    """Three rows collected under a latency fault; ``lose_row`` never answers."""
    events = [
        event(0.01, "collector", "invoke", "collect", rows=3),
        event(
            0.05,
            "fault",
            "info",
            "inject",
            fault="latency",
            target="agent->model",
            latency_ms=200,
            took_s=0.01,
        ),
    ]
    for row in range(3):
        events.append(event(0.02 + row * 0.001, "collector", "invoke", "run", row=row))
        events.append(event(0.1, "agent", "ok", "POST /run", row=row, status=200))
        if row != lose_row:
            events.append(event(0.3 + row * 0.1, "collector", "ok", "run", row=row))
    events.append(event(0.55, "collector", "ok", "collect", returned=3))
    events.append(event(1.05, "fault", "info", "heal", fault="latency", target="agent->model", took_s=0.001))
    return sorted(events, key=lambda item: item.t)


def result(
    name: str = "slow-link",
    *,
    rollouts: Sequence[Rollout] | None = None,
    verdicts: Sequence[Verdict] = (),
    raised: BaseException | None = None,
    elapsed_s: float = 0.55,
    description: str = "A slow model link.",
) -> ScenarioResult:
    outcome = ScenarioResult(scenario(name, description), rows(3), History(t0=T0))
    outcome.rollouts = list(rollouts) if rollouts is not None else None
    outcome.raised = raised
    outcome.elapsed_s = elapsed_s
    outcome.faults_injected = 1
    outcome.verdicts = list(verdicts)
    return outcome


def verdict(name: str, status: Status, summary: str = "fine", evidence: Sequence[str] = ()) -> Verdict:
    return Verdict(name, status, summary, tuple(evidence))


def record(
    outcome: ScenarioResult | None,
    *,
    item_outcome: ItemOutcome = "passed",
    name: str = "slow-link",
    events: Sequence[Event] = (),
    message: str = "",
    headline: str = "",
    extra: Mapping[str, Any] | None = None,
) -> ScenarioRecord:
    """A record as the reports keep it, from a live result (or none: the item ended before one)."""
    return ScenarioRecord(
        nodeid=f"{name}.chaos.yaml::{name}",
        name=name,
        outcome=item_outcome,
        duration_s=0.7,
        scenario=ScenarioFacts.of(outcome.scenario if outcome is not None else scenario(name)),
        result=ResultFacts.of(outcome) if outcome is not None else None,
        message=message,
        headline=headline,
        events=tuple(events),
        **(extra or {}),
    )


def completed(count: int) -> list[Rollout]:
    return [Rollout(index, "completed") for index in range(count)]
