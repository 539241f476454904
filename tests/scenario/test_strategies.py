"""The exported Hypothesis strategy draws fault schedules that round-trip through YAML and validate."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_rollout_chaos.scenario import FaultStep, parse_scenario
from pytest_rollout_chaos.scenario.params import fault_kinds
from pytest_rollout_chaos.scenario.strategies import fault_schedules, fault_steps


def scenario_text(schedule: list[FaultStep], tasks: list[str]) -> str:
    data = {
        "name": "drawn",
        "description": "a drawn schedule",
        "workload": {"rows_per_task": 2, "tasks": tasks},
        "faults": [step.to_yaml() for step in schedule],
        "expect": {"invariants": ["accounted", "bounded"]},
    }
    return yaml.safe_dump(data, sort_keys=False)


@settings(max_examples=150, deadline=None)
@given(fault_schedules(total_rollouts=4, tasks=("calculator", "echo"), max_steps=4))
def test_every_drawn_schedule_round_trips_and_validates(schedule: list[FaultStep]) -> None:
    loaded = parse_scenario(scenario_text(schedule, ["calculator", "echo"]), Path("drawn.chaos.yaml"))
    assert list(loaded.faults) == schedule


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_kind_is_drawn_with_its_parameters(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(fault_kinds()))
    step = data.draw(fault_steps(kinds=[kind], total_rollouts=2, tasks=("calculator",)))
    assert step.kind == kind
    loaded = parse_scenario(scenario_text([step], ["calculator"]), Path("one.chaos.yaml"))
    assert loaded.faults == (step,)


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown fault kind\(s\) \['latncy'\] \(valid: latency, "):
        fault_steps(kinds=["latncy"])
