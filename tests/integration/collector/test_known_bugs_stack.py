"""Each known-bug collector through the real stack: FAIL by the right invariant under its fault,
with a message that names the bug, and PASS without the fault. The reference collector's
native style keeps batched env evaluation where the per-sample bug does not.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from fixtures.collectors import KNOWN_BUGS
from pytest_rollout_chaos.collector.protocol import (
    Collector,
    CollectorContext,
    CollectorFactory,
    Mode,
    Rollout,
    Row,
)
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.collector.results import rollout_from_result
from pytest_rollout_chaos.faults.base import Fault
from pytest_rollout_chaos.faults.kill import Kill
from pytest_rollout_chaos.faults.malformed_json import MalformedJson
from pytest_rollout_chaos.faults.nan_logprobs import NanLogprobs
from pytest_rollout_chaos.faults.prefix_drift import PrefixDrift
from pytest_rollout_chaos.faults.short_results import ShortResults
from pytest_rollout_chaos.faults.trajectory_exception import TrajectoryException
from pytest_rollout_chaos.invariants import Observation, Status, check_all, get
from pytest_rollout_chaos.invariants.observe import observe
from pytest_rollout_chaos.servers.faultlayer.client import LayerControl
from tests.faults._applied import applied
from tests.integration.collector.conftest import Run, greedy_rows

pytestmark = [pytest.mark.slow]

AGENT = "calculator_agent"

# module -> (its fault, words the FAIL story must contain, deadline)
FAULTS: dict[str, tuple[Callable[[], Fault], str, float]] = {
    "silent_short_count": (lambda: ShortResults(target="gym_client", count=1), "silent short count", 20.0),
    "gather_no_isolation": (
        lambda: TrajectoryException(target=AGENT, row=1),
        "gather without isolation",
        20.0,
    ),
    "nan_silent": (lambda: NanLogprobs(target=AGENT, row=2), "non-finite logprobs reached the trainer", 20.0),
    "endless_retry": (lambda: Kill(target=AGENT), "the collection hung", 3.0),
    "swallowed_exception": (lambda: TrajectoryException(target=AGENT, row=1), "have no rollout (lost)", 20.0),
    "batch_retry_duplicates": (
        lambda: TrajectoryException(target=AGENT, row=1, count=1),
        "more than one rollout (duplicated)",
        20.0,
    ),
    "prefix_passthrough": (lambda: PrefixDrift(target=AGENT, row=0), "prefix drift passed through", 20.0),
    "bare_cancelled": (lambda: TrajectoryException(target=AGENT, row=1), "root cause is hidden", 20.0),
    # the Gym client retries a refused agent forever, as NeMo Gym's does; nothing else ends the wait
    "no_deadline": (lambda: Kill(target=AGENT), "the collection hung", 3.0),
    "failed_as_completed": (
        lambda: TrajectoryException(target=AGENT, row=1),
        "claim a result the servers never produced",
        20.0,
    ),
    "turns_dropped_on_drift": (
        lambda: PrefixDrift(target="model", row=0, mode="end_of_turn"),
        "not what the model generated for their row",
        20.0,
    ),
    "nan_zeroed": (
        lambda: NanLogprobs(target=AGENT, row=2),
        "hand back logprobs the model never reported",
        20.0,
    ),
    "unbounded_retries": (
        lambda: NanLogprobs(target=AGENT, row=2, every=1),
        "were retried past the limit",
        20.0,
    ),
    "empty_epoch": (lambda: TrajectoryException(target=AGENT), "an empty epoch", 20.0),
    "detached_after_raise": (
        lambda: ShortResults(target="gym_client", count=1),
        "kept working after the collection ended",
        20.0,
    ),
    "drift_fails_batch": (
        lambda: PrefixDrift(target=AGENT, row=0),
        "the batch failed for no batch-level cause",
        20.0,
    ),
    "generic_abort": (
        lambda: TrajectoryException(target=AGENT, row=1),
        "1 aborted rollouts do not name their root cause",
        20.0,
    ),
    "retry_hotter": (
        lambda: NanLogprobs(target=AGENT, row=2, count=1),
        "asked for another sample than the attempt they replaced",
        20.0,
    ),
    "short_logprobs_trained": (
        lambda: MalformedJson(target=AGENT, route="/run", row=2, count=1, style="short_logprobs"),
        "non-finite logprobs reached the trainer",
        20.0,
    ),
    "empty_generation_hint": (
        lambda: MalformedJson(target=AGENT, route="/run", style="no_output"),
        "for its failed rows alone",
        20.0,
    ),
}
# Exercised by their own tests below (their workload or their fault differs), or in the catalog
# (swallows_cancel: the cancel fault needs the scenario runner's collection; length_as_completed:
# a workload that cuts generations at the token limit, native-token-limit-truncated;
# resends_timed_out: a frozen agent held for three request deadlines, agent-frozen;
# outage_as_aborted: one agent of two killed for good, agent-killed-stays-down;
# placeholder_in_group: a workload of GRPO groups, group-trajectory-exception; eos_doubled: the
# drift splice, prefix-drift; reward_first_attempt: attempts scored apart, nan-logprobs-retry-rewards;
# retry_edits_caller_rows: the engine's copy of the rows, nan-logprobs-nan; task_batched_answers: tasks
# interleaved, workload-out-of-order; permit_released_twice: rows beyond the concurrency,
# workload-queued-behind-concurrency; drains_before_cancel: a cancel while a row hangs,
# collection-cancelled-while-a-row-hangs; batch_wide_group_filter: a group reward spread,
# group-failure-spares-healthy-groups; drift_trained: the layer's record of the logprobs it drifted,
# logprob-drift-masked; empty_output_completed: a /run answer the layer emptied, run-answer-emptied;
# observation_dropped: native style, below; policy_lost_per_row: the policy killed in native style,
# native-policy-killed; permit_leaked_on_failure: a second collection on the same collector,
# next-step-after-failed-rows; deadline_split_over_attempts: a hung row given up, one-row-hangs;
# eos_appended_at_stop: turns that stop at a stop string, turn-ends-at-tool-call).
ELSEWHERE = {
    "observation_dropped",
    "policy_lost_per_row",
    "resends_timed_out",
    "outage_as_aborted",
    "per_sample_env",
    "mixed_env_batch",
    "collection_deadline_only",
    "reward_shifted",
    "swallows_cancel",
    "length_as_completed",
    "placeholder_in_group",
    "eos_doubled",
    "reward_first_attempt",
    "retry_edits_caller_rows",
    "task_batched_answers",
    "permit_released_twice",
    "drains_before_cancel",
    "batch_wide_group_filter",
    "drift_trained",
    "empty_output_completed",
    "permit_leaked_on_failure",
    "deadline_split_over_attempts",
    "eos_appended_at_stop",
}


def _factory(module: str) -> CollectorFactory:
    factory: CollectorFactory = importlib.import_module(f"fixtures.collectors.{module}").factory
    return factory


async def _observe(
    run: Run,
    factory: CollectorFactory,
    *,
    deadline_s: float,
    mode: Mode = "train",
    rows: list[dict[str, Any]] | None = None,
) -> Observation:
    chosen = greedy_rows(run, 4) if rows is None else rows
    observation = await observe(
        factory(run.ctx),
        chosen,
        mode=mode,
        history=run.ctx.history,
        deadline_s=deadline_s,
        request_timeout_s=run.ctx.settings.request_timeout_s,
        max_attempts=run.ctx.settings.max_logprob_attempts,
    )
    await asyncio.sleep(0.5)  # whatever the collector left running shows itself
    return observation


def two_task_rows(run: Run) -> list[dict[str, Any]]:
    """Two calculator rows, then two echo rows (single turn: they finish first), ``_rowidx`` 0..3.

    Every row is sampled greedily, so each earns the same reward on every run."""
    echo = run.stack.gym.rows("echo", 2)
    for row in echo:
        row["responses_create_params"]["temperature"] = 0.0
    rows = greedy_rows(run, 2) + echo
    return [{**row, "_rowidx": index} for index, row in enumerate(rows)]


def test_every_known_bug_is_exercised_here() -> None:
    assert set(FAULTS) | ELSEWHERE == set(KNOWN_BUGS)


@pytest.mark.asyncio
@pytest.mark.parametrize("module", sorted(FAULTS))
async def test_known_bug_fails_under_its_fault(run: Run, module: str) -> None:
    make_fault, words, deadline_s = FAULTS[module]
    async with applied(make_fault(), run.faults):
        observation = await _observe(run, _factory(module), deadline_s=deadline_s)
    [verdict] = check_all(observation, [get(KNOWN_BUGS[module])])
    assert verdict.status is Status.FAIL, verdict.render()
    assert words in verdict.summary
    assert "faults: inject" in verdict.summary  # the story says what the fault did and when


@pytest.mark.asyncio
@pytest.mark.parametrize("module", sorted(FAULTS))
async def test_known_bug_passes_without_its_fault(run: Run, module: str) -> None:
    observation = await _observe(run, _factory(module), deadline_s=FAULTS[module][2] + 10.0)
    [verdict] = check_all(observation, [get(KNOWN_BUGS[module])])
    # without the fault some invariants find nothing to judge (no failure to isolate): never a FAIL
    assert verdict.status in (Status.PASS, Status.NOT_JUDGED), verdict.render()


def _native(run: Run) -> Run:
    settings = replace(run.ctx.settings, style="native", max_turns=3, max_new_tokens=64)
    return replace(run, ctx=replace(run.ctx, settings=settings))


@pytest.mark.asyncio
async def test_reference_native_style_batches_env_steps_in_validation(run: Run) -> None:
    native = _native(run)
    observation = await _observe(native, ReferenceCollector, deadline_s=30.0, mode="validation")
    assert observation.rollouts is not None, observation.raised
    assert {r.status for r in observation.rollouts if r} <= {"completed", "truncated"}
    steps = run.ctx.history.events(source="collector", op="env_step")
    assert steps[0].data["batch_size"] == 4, [(r.status, r.error) for r in observation.rollouts if r]
    assert len(steps) >= 2  # multi-turn: a tool call, then the answer
    verdicts = check_all(
        observation, ["batched_env_eval", "accounted", "finite_logprobs", "prefix_consistent"]
    )
    assert all(v.status is Status.PASS for v in verdicts), [v.render() for v in verdicts]
    served = run.ctx.history.events(source="resources", op="step_batch")
    assert len(served) == len(steps)


@pytest.mark.asyncio
async def test_per_sample_env_fails_batched_env_eval_in_validation_only(run: Run) -> None:
    native = _native(run)
    factory = _factory("per_sample_env")
    validation = await _observe(native, factory, deadline_s=30.0, mode="validation")
    [verdict] = check_all(validation, ["batched_env_eval"])
    assert verdict.status is Status.FAIL, verdict.render()
    assert "per-sample env evaluation in validation" in verdict.summary
    train = await _observe(native, factory, deadline_s=30.0, mode="train")
    [verdict] = check_all(train, ["batched_env_eval"])
    assert verdict.status is Status.PASS, verdict.render()


@pytest.mark.asyncio
async def test_tool_results_dropped_from_the_conversation_fail_conversation_carried(run: Run) -> None:
    native, rows = _native(run), greedy_rows(run, 4)
    async with LayerControl(run.faults.layer_url()) as layer:
        await layer.register_rows(rows)  # as the engine does: native policy calls carry no row
    reference = await _observe(native, ReferenceCollector, deadline_s=30.0, rows=rows)
    [verdict] = check_all(reference, ["conversation_carried"])
    assert verdict.status is Status.PASS, verdict.render()
    # judged over the same History, after the reference's run: its hand-overs stay carried
    dropped = await _observe(native, _factory("observation_dropped"), deadline_s=30.0, rows=rows)
    [verdict] = check_all(dropped, ["conversation_carried"])
    assert verdict.status is Status.FAIL, verdict.render()
    assert "next model call ended with" in verdict.evidence[0]


@pytest.mark.asyncio
async def test_a_collection_deadline_alone_notices_a_short_count_late(run: Run) -> None:
    """``bounded`` passes a collector that finds a short count only at its collection deadline;
    ``ends_promptly`` does not."""
    settings = replace(run.ctx.settings, request_timeout_s=2.0, collect_timeout_s=8.0)
    short = replace(run, ctx=replace(run.ctx, settings=settings))
    async with applied(ShortResults(target="gym_client", count=1), run.faults):
        observation = await _observe(short, _factory("collection_deadline_only"), deadline_s=20.0)
    assert observation.raised is not None
    assert observation.elapsed_s >= 8.0
    late, bounded = check_all(observation, ["ends_promptly", "bounded"])
    assert late.status is Status.FAIL, late.render()
    assert "every request was answered, so nothing was left to wait for" in late.summary
    assert bounded.status is Status.PASS


@pytest.mark.asyncio
async def test_rewards_shifted_past_an_aborted_row_fail_rewards_recorded(run: Run) -> None:
    rows = two_task_rows(run)
    async with applied(TrajectoryException(target=AGENT, row=1), run.faults):
        observation = await _observe(run, _factory("reward_shifted"), deadline_s=20.0, rows=rows)
    shifted, turns = check_all(observation, ["rewards_recorded", "turns_generated"])
    assert shifted.status is Status.FAIL, shifted.render()
    assert shifted.evidence[0].startswith("row 2: reward 0.0, but the row's /run"), shifted.evidence
    assert turns.status is Status.PASS, "the turns stayed with their rows"
    async with applied(TrajectoryException(target=AGENT, row=1), run.faults):
        reference = await _observe(run, ReferenceCollector, deadline_s=20.0, rows=two_task_rows(run))
    [verdict] = check_all(reference, ["rewards_recorded"])
    assert verdict.status is Status.PASS, verdict.render()


class _CompletionOrder:
    """Results labelled by the order they complete in, not by their ``_rowidx``."""

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        done = [await awaitable for awaitable in self.ctx.gym.run_examples(rows)]
        return [
            rollout_from_result(int(row["_rowidx"]), result)
            for row, (_, result) in zip(rows, done, strict=True)
        ]


@pytest.mark.asyncio
async def test_rollouts_relabelled_in_completion_order_fail_even_when_no_row_fails(run: Run) -> None:
    def factory(ctx: CollectorContext) -> Collector:
        return _CompletionOrder(ctx)

    observation = await _observe(run, factory, deadline_s=20.0, rows=two_task_rows(run))
    assert observation.rollouts is not None
    assert all(r and r.status == "completed" for r in observation.rollouts)
    [verdict] = check_all(observation, ["turns_generated"])
    assert verdict.status is Status.FAIL, verdict.render()
