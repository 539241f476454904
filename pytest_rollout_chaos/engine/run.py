"""One scenario: reset the stack, collect under the fault schedule, heal, judge, tell the story.

The plugin side (``scenario_items.run_scenario``) gets the session's settings and stack and calls
``collector_for``, ``run_on`` and ``raise_for`` in turn. The collection runs
in its own event loop with the scenario's deadline (``expect.within_s``); a collector that
does not finish by then is cancelled and judged by ``bounded``, it never becomes a CI timeout.
Every fault is healed before judging, on every path. With ``workload.collections`` above 1 the
same collector then collects again (``engine.next_steps``): the invariants judge the first
collection on the History up to the first of those, ``next_steps_sound`` the rest. Judging is
pure: the invariants named by the scenario and the standing ones
(``invariants.registry.STANDING``) read the History and the outcome, the witnesses it names are
counted, and the expectations (``raises`` or ``rollouts``) are compared with what came back. A
FAIL, an UNKNOWN or a missed expectation raises ``InvariantViolation`` whose text lists them,
the outcome and the timeline; a run that judged nothing of what the scenario lists
(``engine.vacuity``) raises ``VacuousScenarioError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import random
import time
from typing import Any, Final, cast

from pytest_rollout_chaos import acting
from pytest_rollout_chaos.collector import abilities, contract
from pytest_rollout_chaos.collector.protocol import Collector, CollectorFactory, CollectorSettings, Rollout
from pytest_rollout_chaos.collector.target import load_factory
from pytest_rollout_chaos.engine import fit, vacuity
from pytest_rollout_chaos.engine.acted import count_touches, problems
from pytest_rollout_chaos.engine.expectations import check_expectations
from pytest_rollout_chaos.engine.next_steps import run_next_steps
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.engine.schedule import Schedule
from pytest_rollout_chaos.errors import (
    CannotRunHere,
    FaultError,
    NotJudgedError,
)
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Observation
from pytest_rollout_chaos.invariants.compose import check_all
from pytest_rollout_chaos.invariants.registry import judged
from pytest_rollout_chaos.invariants.witnesses import look
from pytest_rollout_chaos.scenario.model import Scenario, Workload
from pytest_rollout_chaos.servers.faultlayer.client import LayerControl
from pytest_rollout_chaos.servers.gym.stack import GymStack
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack
from pytest_rollout_chaos.trial import open_trial

CANCEL_GRACE_S: Final = 5.0
READY_GRACE_S: Final = 60.0
SETTLE_S: Final = 2.0
ROW_ID_SCHEMES: Final = {"positions": (0, 1), "offset": (1000, 1), "sparse": (7, 3)}  # first id, step


def collector_for(scenario: Scenario, target: str) -> CollectorFactory:
    """The factory of the collector under test (``--rollout-chaos-target``); ``CannotRunHere`` when
    what it declares (``collector.abilities``: a collector class is its own factory) leaves this
    scenario out, before anything starts."""
    factory = load_factory(target)
    reason = fit.collector_unfit(scenario, factory)
    if reason is not None:
        raise CannotRunHere(reason)
    return factory


def run_on(
    scenario: Scenario, stack: ChaosStack, factory: CollectorFactory, settings: ChaosSettings
) -> ScenarioResult:
    """Run ``scenario`` on the session's ``stack`` and judge it.

    ``CannotRunHere`` when it cannot run there (``engine.fit``); ``NotJudgedError`` when the
    collector declines it, from its factory or from ``collect`` before running anything. A runner
    reports either as a skip (``scenario_items``), never as a verdict.
    """
    stack, reason = fit.fitted(scenario, stack, factory, run_replicas=settings.policy_replicas)
    if reason is not None:
        raise CannotRunHere(reason)
    stack.reset(
        env_latency_ms_per_call=scenario.stack.env_latency_ms_per_call,
        env_latency_ms_per_item=scenario.stack.env_latency_ms_per_item,
        policy_seed=scenario.stack.policy.seed,
    )
    if not scenario.stack.policy.splice_prefix:
        stack.gym.set_splice(False)  # vanilla re-rendering: retokenization drift happens for real
    if scenario.stack.rescore_bonus:
        stack.gym.set_rescore_bonus(scenario.stack.rescore_bonus)
    if scenario.stack.reward_spread:
        stack.gym.set_reward_spread(scenario.stack.reward_spread)
    result = run_once(scenario, stack, factory, settings.seed, target=settings.target)
    if isinstance(result.raised, NotJudgedError):  # collect declined it before running anything
        raise result.raised
    judge(result)
    return result


def build_rows(workload: Workload, gym: GymStack) -> list[dict[str, Any]]:
    """The requested rows: each task's rows, each repeated per generation (one prompt's group), with
    the workload's token limit in their ``responses_create_params`` when it sets one. ``_rowidx``
    follow ``workload.row_ids`` in the task-by-task layout; the groups are then handed over in
    ``workload.order``, so under ``interleaved`` or ``shuffled`` the ids run out of list order."""
    first, step = ROW_ID_SCHEMES[workload.row_ids]
    per_task: list[list[list[dict[str, Any]]]] = []
    for task in workload.tasks:
        groups = []
        for given in gym.rows(task, workload.rows_per_task):
            row = dict(given)
            if workload.max_output_tokens is not None:
                params = {**row["responses_create_params"], "max_output_tokens": workload.max_output_tokens}
                row["responses_create_params"] = params
            groups.append([dict(row) for _ in range(workload.generations_per_prompt)])
        per_task.append(groups)
    numbered = (row for groups in per_task for group in groups for row in group)
    for number, row in enumerate(numbered):
        row["_rowidx"] = first + step * number
    return [row for group in _in_order(per_task, workload.order) for row in group]


def _in_order(per_task: list[list[list[dict[str, Any]]]], order: str) -> list[list[dict[str, Any]]]:
    """The groups of every task in ``order``: task by task, one of each task in turn, or a fixed shuffle."""
    if order == "interleaved":
        rounds = max((len(groups) for groups in per_task), default=0)
        return [groups[turn] for turn in range(rounds) for groups in per_task if turn < len(groups)]
    flat = [group for groups in per_task for group in groups]
    if order == "shuffled":
        random.Random(len(flat)).shuffle(flat)  # the same shuffle every run of the scenario
    return flat


def collector_settings(scenario: Scenario) -> CollectorSettings:
    """The collector's own limits, scaled to the scenario's deadline so it can fail inside it."""
    within_s = scenario.expect.within_s
    settings = CollectorSettings(
        request_timeout_s=max(1.0, min(30.0, within_s / 4)),
        collect_timeout_s=max(1.0, within_s * 0.9),
        policy_ready_timeout_s=max(1.0, within_s / 2),
        style=scenario.workload.style,
        trainer_config=scenario.workload.trainer_config,
    )
    workload = scenario.workload
    if workload.max_concurrency is not None:
        settings = dataclasses.replace(settings, max_concurrency=workload.max_concurrency)
    tokens = workload.max_output_tokens
    return settings if tokens is None else dataclasses.replace(settings, max_new_tokens=tokens)


def run_once(
    scenario: Scenario, stack: ChaosStack, factory: CollectorFactory, seed: int, *, target: str | None = None
) -> ScenarioResult:
    """Run ``scenario`` once (not judged) in a private event loop, closed even if the collector
    ignores cancellation."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(execute(scenario, stack, factory, seed=seed, target=target))
    finally:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait(pending, timeout=CANCEL_GRACE_S))
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def execute(
    scenario: Scenario, stack: ChaosStack, factory: CollectorFactory, *, seed: int, target: str | None = None
) -> ScenarioResult:
    """Collect once under the fault schedule; heal everything; collect again on the same collector
    as often as ``workload.collections`` asks (``engine.next_steps``); return what happened (no
    judging).

    A collector that breaks its contract (``collector.contract``) raises ``CollectorContractError``
    naming ``target`` (the factory's own name when not given), after every fault is healed.
    """
    who = contract.describe(factory, target or f"{factory.__module__}:{factory.__qualname__}")
    rows = build_rows(scenario.workload, stack.gym)
    async with open_trial(stack, settings=collector_settings(scenario), seed=seed) as trial:
        history = trial.history
        # The rows as handed over, kept apart from the caller's, which ``rows_unchanged`` compares.
        result = ScenarioResult(
            scenario, copy.deepcopy(rows), history, rows_after=rows, servers=stack.process_names()
        )
        # Building the schedule builds every fault: a bad parameter fails before anything is touched.
        schedule = Schedule(
            [(step, stack.expand_target(step.target)) for step in scenario.faults], trial.faults
        )
        if stack.fault_layer is not None:
            async with LayerControl(stack.fault_layer.url) as layer:
                await layer.register_rows(rows)  # so policy requests, which carry no row, are tied to one
        collector = contract.build_collector(factory, trial.collector, who=who)
        unfit = fit.collector_unfit(scenario, collector)  # what the collector built declares
        if unfit is not None:
            raise CannotRunHere(unfit)
        result.concurrency_limit = abilities.concurrency_limit(collector, trial.collector.settings)
        result.not_applicable = fit.inapplicable(collector)
        started = time.monotonic()
        loading = await _policy_loading(scenario, stack, history)
        await schedule.start()  # every ``at: start`` fault is armed before the collector runs
        result.started_at = started
        collect = asyncio.create_task(collector.collect(rows, mode=scenario.workload.mode))
        trial.faults.collection.attach(collect)  # for the ``cancel`` fault
        try:
            done, _ = await asyncio.wait({collect}, timeout=scenario.expect.within_s)
            if done:
                try:
                    returned = collect.result()
                except (Exception, asyncio.CancelledError) as error:
                    # A CancelledError here is the collector's own, or the ``cancel`` fault's: an
                    # outcome to judge either way (slime's gather left only CancelledError in the log).
                    result.raised = error
                else:
                    # None entries (rows the collector lost) stay in: ``accounted`` judges them
                    result.rollouts = cast(list[Rollout], contract.check_rollouts(returned, rows, who=who))
            else:
                result.timed_out = True
                collect.cancel()
                await asyncio.wait({collect}, timeout=CANCEL_GRACE_S)
        finally:
            result.elapsed_s = time.monotonic() - started
            if loading is not None:  # the policy must be back before the next scenario
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(loading, timeout=READY_GRACE_S)
                if loading.done() and not loading.cancelled() and loading.exception() is not None:
                    result.fault_errors.append(FaultError(f"restarting the policy: {loading.exception()}"))
            await schedule.stop()
            result.faults_injected = schedule.injected
            result.fault_errors += schedule.errors
            result.unfired = schedule.unfired
        await _next_steps(result, collector, who=who)
    # The collector's connections are closed now; what they left in flight is recorded shortly.
    await acting.settle(history, timeout_s=SETTLE_S)
    _count_touches(result, schedule, started_at=started)
    return result


async def _next_steps(result: ScenarioResult, collector: Collector, *, who: str) -> None:
    """The collections after the first, on the same ``collector``, when the scenario asks for them
    (not after a collector declined the first: that scenario is not judged)."""
    scenario = result.scenario
    if scenario.workload.collections == 1 or isinstance(result.raised, NotJudgedError):
        return
    # what the first collection left in flight is recorded before the cut its invariants read
    await acting.settle(result.history, timeout_s=SETTLE_S)
    result.judged_until = time.monotonic()
    result.follow_ups = await run_next_steps(
        collector, scenario, result.rows, result.history, who=who, cancel_grace_s=CANCEL_GRACE_S
    )


def _count_touches(result: ScenarioResult, schedule: Schedule, *, started_at: float) -> None:
    """What each injected fault touched of the first collection, and the steps that touched not
    what they said."""
    ended = started_at + result.elapsed_s
    result.touches = count_touches(schedule.applied, result.judged_history(), ended_at=ended)
    result.unacted = problems(result.touches, started_at=started_at, ended_at=ended, t0=result.history.t0)


async def _policy_loading(
    scenario: Scenario, stack: ChaosStack, history: History
) -> asyncio.Task[None] | None:
    """``stack.policy.ready_delay_s``: the policy is stopped and comes back only after that long,
    refusing connections meanwhile, as a model server does while it loads; the collection starts
    right away (the NeMo Skills pipeline case). Returns the restart under way."""
    delay_s = scenario.stack.policy.ready_delay_s
    if delay_s <= 0:
        return None
    process = stack.policy.process
    if process is None:  # the fit step turns such a scenario away before it gets here
        raise FaultError(f"stack.policy.ready_delay_s: {stack.policy.unmanaged_reason()}")
    await asyncio.to_thread(process.stop)
    history.append("process", "info", "loading", {"server": process.name, "ready_delay_s": delay_s})
    return asyncio.create_task(asyncio.to_thread(process.restart, ready_delay_s=delay_s))


def judge(result: ScenarioResult) -> None:
    """Fill in the verdicts and expectation failures of ``result`` (pure)."""
    scenario = result.scenario
    settings = collector_settings(scenario)
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
    result.expectation_failures = check_expectations(
        scenario.expect, result.rollouts, result.raised, result.timed_out
    )
    result.vacuous = vacuity.vacuous(
        scenario.expect, result.verdicts, result.witnesses, not_applicable=result.not_applicable
    )
