"""Judging a run: what the scenario lists, held against what happened, filled into its result.

Judging is pure. The invariants named by the scenario and the standing ones
(``invariants.registry.STANDING``) judge the first collection on its History (``next_steps_sound``
the collections after it), the witnesses it names are counted, the expectations (``raises`` or
``rollouts``) are compared with what came back, and ``vacuity`` names what was listed but not
judged or not seen. ``story.raise_for`` then raises what failed.
"""

from __future__ import annotations

from pytest_rollout_chaos.engine import vacuity
from pytest_rollout_chaos.engine.expectations import check_expectations
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.engine.workload import collector_settings
from pytest_rollout_chaos.invariants.base import Observation
from pytest_rollout_chaos.invariants.compose import check_all
from pytest_rollout_chaos.invariants.registry import judged
from pytest_rollout_chaos.invariants.witnesses import look


def judge(result: ScenarioResult) -> None:
    """Fill in the verdicts and expectation failures of ``result`` (pure)."""
    scenario = result.scenario
    result.expectation_failures = check_expectations(
        scenario.expect, result.rollouts, result.raised, result.timed_out
    )
    settings = collector_settings(scenario)  # the collector's, as it was handed them
    history = result.judged_history()
    observation = Observation(
        rows=result.rows,
        rollouts=result.rollouts,
        raised=result.raised,
        history=history,
        deadline_s=scenario.expect.within_s,
        elapsed_s=result.elapsed_s,
        mode=scenario.workload.mode,
        max_aborted_fraction=settings.max_aborted_fraction,
        timed_out=result.timed_out,
        started_at=result.started_at,
        request_timeout_s=settings.request_timeout_s,
        max_attempts=settings.max_logprob_attempts,
        collect_timeout_s=settings.collect_timeout_s,
        generations_per_prompt=scenario.workload.generations_per_prompt,
        rows_after=result.rows_after,
        style=scenario.workload.style,
        max_concurrency=result.concurrency_limit,
        follow_ups=result.follow_ups,
    )
    next_steps = scenario.workload.collections > 1
    names = judged(scenario.expect.invariants, next_steps=next_steps)
    result.verdicts = check_all(observation, names, not_applicable=result.not_applicable)
    result.witnesses = look(history, scenario.expect.witness)
    result.vacuous = vacuity.vacuous(
        scenario.expect, result.verdicts, result.witnesses, not_applicable=result.not_applicable
    )
