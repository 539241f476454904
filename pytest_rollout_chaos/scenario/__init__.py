"""Scenario files (``*.chaos.yaml``): the format. The model, its validation, JSON Schema and template.

The engine that runs a scenario is ``engine``; the pytest items that collect one are
``scenario_items``.
"""

from __future__ import annotations

from pytest_rollout_chaos.scenario.model import (
    Expectation,
    FaultStep,
    PolicyOptions,
    Raises,
    RolloutConditions,
    Scenario,
    ScenarioFileError,
    StackSpec,
    Trigger,
    Workload,
    load_scenario,
    parse_scenario,
)

__all__ = [
    "Expectation",
    "FaultStep",
    "PolicyOptions",
    "Raises",
    "RolloutConditions",
    "Scenario",
    "ScenarioFileError",
    "StackSpec",
    "Trigger",
    "Workload",
    "load_scenario",
    "parse_scenario",
]
