"""A project for the report tests: one scenario, and a runner without servers that records a
small History, returns rollouts (one row short for ``loses-a-row``), applies each fault step for
real (its fault built by the registry, touching one request per returned row) and lets the real
``judge`` and invariants decide, as ``run_scenario`` does. ``no-result`` fails to start its stack;
``not-here`` is skipped; ``two-steps`` has a second collection, which raised."""

from __future__ import annotations

import pytest

SCENARIO = """\
name: {name}
description: "A slow model link <em>under load</em>; every row still completes."
tags: [network, demo]
upstream: ["NVIDIA-NeMo/Gym#1787"]
workload:
  rows_per_task: 3
faults:
  - kind: latency
    target: agent->model
    at: start
    latency_ms: 200
expect:
  invariants: [accounted, bounded]
  within_s: 30
"""

RUNNER_CONFTEST = """
import pytest
from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.errors import InvariantViolation
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.engine.acted import Touches
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.report.reports import RESULT_KEY
from pytest_rollout_chaos.engine.verdicts import judge
from pytest_rollout_chaos.engine.story import failure_text
from pytest_rollout_chaos.engine.schedule import Applied
from pytest_rollout_chaos.invariants.base import FollowUp

@pytest.fixture
def chaos_scenario_runner():
    def run(scenario, request):
        if scenario.name == "no-result":
            raise RuntimeError("the stack could not start")
        if scenario.name == "not-here":
            pytest.skip("latency needs a proxy this backend lacks")
        history = History()
        rows = [{"_rowidx": i, "agent_ref": {"name": "calculator_agent"}} for i in range(3)]
        history.append("collector", "invoke", "collect", {"rows": 3})
        returned = 2 if scenario.name == "loses-a-row" else 3
        touches = []
        for step in scenario.faults:
            fault = registry.build(step.kind, {"target": step.target, **step.params})
            data = {"fault": step.kind, "target": step.target, **step.params}
            injected = history.append("fault", "info", "inject", data)
            applied = Applied(step, fault, injected.t, injected=True)
            touches.append(Touches(applied, returned, f"requests on {step.target} while it was on"))
        for row in rows:
            history.append("collector", "invoke", "run", {"row": row["_rowidx"]})
        for index in range(returned):
            history.append("collector", "ok", "run", {"row": index})
        history.append("collector", "ok", "collect", {"returned": returned})
        for touch in touches:
            step = touch.applied.step
            healed = history.append("fault", "info", "heal", {"fault": step.kind, "target": step.target})
            touch.applied.healed_at = healed.t
        result = ScenarioResult(scenario, rows, history)
        result.rollouts = [Rollout(index, "completed") for index in range(returned)]
        result.elapsed_s = 0.25
        result.faults_injected = len(touches)
        result.touches = touches
        if scenario.name == "two-steps":
            second = FollowUp(2, rows, None, RuntimeError("no permit left"), False, healed.t, 0.01, 30.0)
            result.follow_ups = [second]
        judge(result)
        request.node.stash[RESULT_KEY] = result
        if not result.passed:
            raise InvariantViolation(failure_text(result))
    return run
"""


def make_project(pytester: pytest.Pytester, *names: str) -> None:
    pytester.makeconftest(RUNNER_CONFTEST)
    for name in names:
        pytester.makefile(".chaos.yaml", **{name: SCENARIO.format(name=name)})
