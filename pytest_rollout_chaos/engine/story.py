"""A scenario's failure text as a story: scenario and line, fault schedule, what broke, a hint.

Pure string building, so the collection module stays about pytest and the runner can reuse it.
"""

from __future__ import annotations

import textwrap
from typing import Final

from pytest_rollout_chaos.errors import (
    CollectorContractError,
    FaultError,
    InvariantViolation,
    ScenarioError,
    VacuousScenarioError,
)
from pytest_rollout_chaos.scenario.model import Scenario

HINT_INVARIANT: Final = (
    "the collector under test broke the invariant(s) above; the evidence events come from the run's "
    "History, and the log tails of the servers this story names follow (--rollout-chaos-logs=all: "
    "every server's)"
)
HINT_FAULT: Final = (
    "the harness could not inject or heal a fault: the environment is at fault, not the collector "
    "(check the proxy backend and process permissions, then rerun)"
)
HINT_SCENARIO: Final = "fix the scenario file; `rollout-chaos validate FILE` checks it without running"
HINT_VACUOUS: Final = (
    "the run did not produce what the scenario tests, so it proves nothing about the collector either "
    "way; see what was not judged or not seen above"
)
HINT_CONTRACT: Final = (
    "the collector under test does not keep its contract (docs/writing-a-collector.md); fix the "
    "collector or the factory named above, nothing was judged"
)
HINT_OTHER: Final = "see the traceback"


def tell(scenario: Scenario, error: BaseException) -> str:
    """The whole failure text for ``error`` raised while running ``scenario``."""
    lines = [f"scenario {scenario.name!r} failed ({scenario.path}:{scenario.line})"]
    lines += [f"  {line}" for line in scenario.summary.splitlines()]
    if scenario.upstream:
        lines.append(f"  upstream: {', '.join(scenario.upstream)}")
    lines.append("")
    lines += schedule_lines(scenario)
    lines.append("")
    lines.append(f"{type(error).__name__}:")
    lines.append(textwrap.indent(str(error).rstrip() or "(no message)", "  "))
    lines.append("")
    lines.append(f"hint: {hint_for(error)}")
    return "\n".join(lines)


def schedule_lines(scenario: Scenario) -> list[str]:
    """The declared fault schedule, one step per line with its YAML line; without one, the witnesses."""
    if not scenario.faults:
        witnessed = [f"witness: {name}, at least {least}" for name, least in scenario.expect.witness.items()]
        return ["fault schedule: none (a baseline run)", *witnessed]
    lines = ["fault schedule:"]
    for step in scenario.faults:
        lines.append(f"  line {step.line}: {step.describe()}")
    return lines


def hint_for(error: BaseException) -> str:
    if isinstance(error, InvariantViolation):
        return HINT_INVARIANT
    if isinstance(error, FaultError):
        return HINT_FAULT
    if isinstance(error, VacuousScenarioError):
        return HINT_VACUOUS
    if isinstance(error, ScenarioError):
        return HINT_SCENARIO
    if isinstance(error, CollectorContractError):
        return HINT_CONTRACT
    return HINT_OTHER
