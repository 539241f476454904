"""Same seed, same verdicts: a small subset of the catalog, run three times on the session's stack.

Each run resets the stack, collects under the scenario's fault schedule with the session's
seed, heals and judges, exactly as a ``*.chaos.yaml`` item does. What must not change from
run to run: each invariant's status, the failed expectations, whether (and what) the
collector raised, and which rows ended aborted. The subset mixes a hard failure (a killed
agent), a per-row fault (NaN logprobs, retried) and an isolated trajectory exception.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.collector.abilities import declared
from pytest_rollout_chaos.collector.target import load_factory
from pytest_rollout_chaos.engine import retarget
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.engine.run import execute
from pytest_rollout_chaos.engine.verdicts import judge
from pytest_rollout_chaos.scenario import load_scenario
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack

pytestmark = pytest.mark.slow  # runs scenarios on the whole stack

SUBSET = ("agent-oom-killed", "nan-logprobs-nan", "trajectory-exception-isolated")
RUNS = 3


def _run_once(name: str, stack: ChaosStack, settings: ChaosSettings) -> ScenarioResult:
    path = bundled.catalog_dir() / f"{name}.chaos.yaml"
    if not path.exists():
        pytest.skip(f"{name} is not in the catalog any more; pick another subset")
    scenario = load_scenario(path)
    stack.reset(
        env_latency_ms_per_call=scenario.stack.env_latency_ms_per_call,
        env_latency_ms_per_item=scenario.stack.env_latency_ms_per_item,
    )
    factory = load_factory(settings.target)
    moves = declared(factory)
    moved = retarget.retarget(scenario, moves.retargets, moves.retriggers)
    running = execute(scenario, stack, factory, seed=settings.seed, target=settings.target, retargeted=moved)
    result = asyncio.run(running)
    judge(result)
    return result


def verdict_of(result: ScenarioResult) -> dict[str, Any]:
    """What must repeat: invariant statuses, failed expectations, what was raised, which rows aborted."""
    return {
        "invariants": [(verdict.name, verdict.status.value) for verdict in result.verdicts],
        "expectations": result.expectation_failures,
        "raised": None if result.raised is None else type(result.raised).__name__,
        "aborted_rows": sorted(r.row_index for r in result.rollouts or [] if r.status == "aborted"),
        "timed_out": result.timed_out,
        "fault_errors": [str(error) for error in result.fault_errors],
    }


@pytest.mark.parametrize("name", SUBSET)
def test_same_seed_gives_identical_verdicts(
    name: str, chaos_stack: ChaosStack, chaos_settings: ChaosSettings
) -> None:
    verdicts = [verdict_of(_run_once(name, chaos_stack, chaos_settings)) for _ in range(RUNS)]
    assert verdicts[0]["invariants"], "no invariant was judged; nothing to compare"
    assert verdicts[1:] == verdicts[:1] * (RUNS - 1), "\n".join(str(verdict) for verdict in verdicts)
