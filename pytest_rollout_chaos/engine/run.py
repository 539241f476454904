"""One scenario: reset the stack, collect under the fault schedule, heal, then judge.

The plugin side (``scenario_items.run_scenario``) gets the session's settings and stack and calls
``collector_for``, ``run_on`` and ``story.raise_for`` in turn. What the collector is handed (its
rows and settings, ``engine.workload``) is worked out once before the trial opens. The collection
runs in its own event loop with the scenario's deadline (``expect.within_s``); a collector that
does not finish by then is cancelled and judged by ``bounded``, it never becomes a CI timeout.
Every fault is healed before judging, on every path. With ``workload.collections`` above 1 the
same collector then collects again (``engine.next_steps``): the invariants judge the first
collection on the History up to the first of those, ``next_steps_sound`` the rest. Judging
(``engine.verdicts``) is pure; ``engine.story`` raises what failed, with its text.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import logging
import re
import time
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, TextIO, cast

from pytest_rollout_chaos import acting
from pytest_rollout_chaos.collector import abilities, contract
from pytest_rollout_chaos.collector.protocol import Collector, CollectorFactory, Rollout
from pytest_rollout_chaos.collector.target import load_factory
from pytest_rollout_chaos.engine import fit, fit_facts, retarget, story, verdicts
from pytest_rollout_chaos.engine.acted import count_touches, problems
from pytest_rollout_chaos.engine.next_steps import run_next_steps
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.engine.schedule import Schedule
from pytest_rollout_chaos.engine.workload import build_rows, collector_settings
from pytest_rollout_chaos.errors import CannotRunHere, FaultError, NotJudgedError
from pytest_rollout_chaos.scenario.model import Scenario
from pytest_rollout_chaos.servers.faultlayer.client import LayerControl
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack
from pytest_rollout_chaos.trial import open_trial

_logger = logging.getLogger(__name__)

CANCEL_GRACE_S: Final = 5.0
READY_GRACE_S: Final = 60.0
SETTLE_S: Final = 2.0


@dataclass(frozen=True, slots=True)
class Loaded:
    """The collector under test as loaded: its factory and what it declares (``collector.abilities``)."""

    factory: CollectorFactory
    declared: abilities.Abilities


def collector_for(scenario: Scenario, target: str) -> Loaded:
    """The collector under test (``--rollout-chaos-target``); ``CannotRunHere`` when what it declares
    (a collector class is its own factory) leaves this scenario out, before anything starts."""
    factory = load_factory(target)
    declared = abilities.declared(factory)
    reason = fit.collector_unfit(scenario, declared)
    if reason is not None:
        raise CannotRunHere(reason)
    return Loaded(factory, declared)


def run_on(scenario: Scenario, stack: ChaosStack, loaded: Loaded, settings: ChaosSettings) -> ScenarioResult:
    """Run ``scenario`` on the session's ``stack`` with the ``loaded`` collector and judge it.

    ``CannotRunHere`` when it cannot run there (``engine.fit``); ``NotJudgedError`` when the
    collector declines it, from its factory or from ``collect`` before running anything. A runner
    reports either as a skip (``scenario_items``), never as a verdict.

    A run that tested nothing (``story.tested_nothing``) on a policy that samples irreproducibly
    is drawn again, ``settings.redraws`` times at most (``--rollout-chaos-redraws``): it is no
    verdict, and another draw of the model's tokens may give the faults and invariants what they
    need (the tiny model on vLLM may, say, end no turn of the row a drift waits for). A verdict is
    never drawn again; the result lists why each earlier draw did not count (``earlier_draws``).
    """
    fitting = fit.fitted(
        scenario, fit_facts.stack_facts(stack), loaded.declared, run_replicas=settings.policy_replicas
    )
    if fitting.reason is not None:
        raise CannotRunHere(fitting.reason)
    stack = stack.using(fitting.replicas)
    draws = 1 if stack.samples_reproducibly else 1 + settings.redraws
    earlier: list[str] = []
    for draw in range(1, draws + 1):
        # Each draw from a reset stack, set as the scenario's stack asks.
        stack.reset(
            env_latency_ms_per_call=scenario.stack.env_latency_ms_per_call,
            env_latency_ms_per_item=scenario.stack.env_latency_ms_per_item,
            policy_seed=scenario.stack.policy.seed,
        )
        if not scenario.stack.policy.splice_prefix:
            stack.gym.set_splice(False)  # vanilla re-rendering: retokenization drift happens for real
        if scenario.stack.policy.stop:
            stack.gym.set_stop(scenario.stack.policy.stop)
        if scenario.stack.rescore_bonus:
            stack.gym.set_rescore_bonus(scenario.stack.rescore_bonus)
        if scenario.stack.reward_spread:
            stack.gym.set_reward_spread(scenario.stack.reward_spread)
        result = _draw(scenario, stack, loaded.factory, settings, fitting.retargeted)
        why = story.tested_nothing(result)
        if why is None or draw == draws:
            break
        _logger.warning("draw %d of %r tested nothing (%s); drawing again", draw, scenario.name, why)
        earlier.append(why)
    result.earlier_draws = earlier
    return result


def _draw(
    scenario: Scenario,
    stack: ChaosStack,
    factory: CollectorFactory,
    settings: ChaosSettings,
    retargeted: retarget.Retargeted,
) -> ScenarioResult:
    """One run of ``scenario`` on ``stack`` as ``run_on`` reset it for the draw, judged."""
    result = run_once(scenario, stack, factory, settings.seed, target=settings.target, retargeted=retargeted)
    if isinstance(result.raised, NotJudgedError):  # collect declined it before running anything
        raise result.raised
    verdicts.judge(result)
    return result


def run_once(
    scenario: Scenario,
    stack: ChaosStack,
    factory: CollectorFactory,
    seed: int,
    *,
    target: str | None,
    retargeted: retarget.Retargeted,
) -> ScenarioResult:
    """Run ``scenario`` once (not judged) in a private event loop, closed even if the collector
    ignores cancellation."""
    loop = asyncio.new_event_loop()
    result: ScenarioResult | None = None
    with finalized() as left:  # the whole collection: a trainer drops what it leaks at any time
        try:
            running = execute(scenario, stack, factory, seed=seed, target=target, retargeted=retargeted)
            result = loop.run_until_complete(running)
        finally:
            _close(loop)
            if result is not None and result.raised is not None:
                release_frames(result.raised)
    for text in left:
        _logger.warning("the collection left this behind: %s", text)
    return result


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the collection left running (a trainer's siblings of a raising task), give it
    ``CANCEL_GRACE_S``, shut the async generators down, close the loop."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        with contextlib.suppress(Exception):
            loop.run_until_complete(asyncio.wait(pending, timeout=CANCEL_GRACE_S))
    with contextlib.suppress(Exception):
        loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def release_frames(error: BaseException) -> None:
    """Let go of what the frames of ``error`` (and of the errors it was raised from) held: a
    trainer's HTTP session a raising coroutine had open stays reachable through the traceback the
    result keeps, and would be finalized only when the result goes (a pytest item's teardown). The
    traceback keeps its files, lines and functions, all the story shows of it."""
    seen: set[int] = set()
    chained: BaseException | None = error
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        with contextlib.suppress(RuntimeError):  # a frame still running: nothing of ours
            traceback.clear_frames(chained.__traceback__)
        chained = chained.__cause__ or chained.__context__


NEVER_AWAITED: Final = r"coroutine .* was never awaited"
"""The RuntimeWarning Python gives a coroutine finalized before it ran: one a trainer abandoned."""


@contextlib.contextmanager
def finalized() -> Iterator[list[str]]:
    """The texts of the warnings of what is finalized in the block and by a garbage collection
    after it, in the list it yields: a trainer's HTTP sessions and sockets dropped unclosed
    (ResourceWarning), its coroutines abandoned unawaited (``NEVER_AWAITED``), while its tasks
    are cancelled or whenever the garbage collector meets them. Left to Python, each would surface
    as an unraisable warning that pytest reports in the phase of whatever item runs then, failing
    a scenario, or its teardown, that had nothing to do with it. Other warnings go on as they
    would."""
    left: list[str] = []
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def keep(  # noqa: PLR0917 - warnings.showwarning's own signature
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, ResourceWarning) or re.match(NEVER_AWAITED, str(message)):
                left.append(str(message))
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = keep
        warnings.simplefilter("always", ResourceWarning)
        warnings.filterwarnings("always", NEVER_AWAITED, RuntimeWarning)
        try:
            yield left
        finally:
            gc.collect()


async def execute(
    scenario: Scenario,
    stack: ChaosStack,
    factory: CollectorFactory,
    *,
    seed: int,
    target: str | None,
    retargeted: retarget.Retargeted,
) -> ScenarioResult:
    """Collect once under the fault schedule; heal everything; collect again on the same collector
    as often as ``workload.collections`` asks (``engine.next_steps``); return what happened (no
    judging).

    A collector that breaks its contract (``collector.contract``) raises ``CollectorContractError``
    naming ``target`` (the factory's own name when not given), after every fault is healed. Its
    faults act where ``retargeted`` (the fit step's ``engine.retarget``) moved them.
    """
    # What the collector is handed, made once before the trial opens; the fault layer learns the rows.
    settings = collector_settings(scenario)
    rows = build_rows(scenario.workload, stack.gym)
    if stack.fault_layer is not None:
        async with LayerControl(stack.fault_layer.url) as layer:
            await layer.register_rows(rows)  # so policy requests, which carry no row, are tied to one
    async with open_trial(stack, settings=settings, seed=seed) as trial:
        history = trial.history
        # The rows as handed over, kept apart from the caller's, which ``rows_unchanged`` compares.
        result = ScenarioResult(
            scenario, copy.deepcopy(rows), history, rows_after=rows, servers=stack.process_names()
        )
        # Building the schedule builds every fault: a bad parameter fails before anything is touched.
        # Each acts where the collector's retargets move it (``engine.retarget``), recorded as moved.
        retargeted.record(history)
        schedule = Schedule(
            [(step, stack.expand_target(step.target)) for step in retargeted.scenario.faults], trial.faults
        )
        who = contract.describe(factory, target or f"{factory.__module__}:{factory.__qualname__}")
        collector = contract.build_collector(factory, trial.collector, who=who)
        declared = abilities.declared(collector)  # the collector built may declare more
        unfit = fit.unfit(retargeted.scenario, declared)
        if unfit is not None:
            raise CannotRunHere(unfit)
        result.not_applicable = fit.inapplicable(declared)
        result.concurrency_limit = abilities.concurrency_limit(collector, settings)
        started = time.monotonic()
        loading = await stack.policy_loading(scenario.stack.policy.ready_delay_s, history)
        await schedule.start()  # every ``at: start`` fault is armed before the collector runs
        result.started_at = started
        collect = asyncio.create_task(collector.collect(rows, mode=scenario.workload.mode))
        trial.faults.collection.attach(collect)  # for the ``cancel`` fault
        try:
            await _outcome(result, collect, rows, within_s=scenario.expect.within_s, who=who)
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


async def _outcome(
    result: ScenarioResult,
    collect: asyncio.Task[list[Rollout]],
    rows: list[dict[str, Any]],
    *,
    within_s: float,
    who: str,
) -> None:
    """What ``collect`` of ``rows`` came to within ``within_s``: its rollouts (checked against the
    contract), what it raised, or cut at the deadline (then cancelled)."""
    done, _ = await asyncio.wait({collect}, timeout=within_s)
    if not done:
        result.timed_out = True
        collect.cancel()
        await asyncio.wait({collect}, timeout=CANCEL_GRACE_S)
        return
    try:
        returned = collect.result()
    except (Exception, asyncio.CancelledError) as error:
        # A CancelledError here is the collector's own, or the ``cancel`` fault's: an outcome to
        # judge either way (slime's gather left only CancelledError in the log).
        result.raised = error
    else:
        # None entries (rows the collector lost) stay in: ``accounted`` judges them
        result.rollouts = cast(list[Rollout], contract.check_rollouts(returned, rows, who=who))


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
