"""Each gym-style known-bug collector, under its fault, is judged FAIL by the right invariant;
without the fault it passes; the reference collector passes under the same fault.

Faults here are scripted into the in-process Gym runner; tests/integration/collector repeats
this through the real servers.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from fixtures.collectors import KNOWN_BUGS
from pytest_rollout_chaos.collector import reference
from pytest_rollout_chaos.collector.protocol import CollectorFactory
from pytest_rollout_chaos.invariants import Status, check_all, get
from pytest_rollout_chaos.invariants.observe import observe
from tests.collector._fake_gym import FakeGym, context, rows

# module -> (per-row script that is its fault, short_by, words the FAIL summary must contain)
FAULTS: dict[str, tuple[Mapping[int, Sequence[str]], int, str]] = {
    "silent_short_count": ({}, 1, "silent short count"),
    "gather_no_isolation": ({1: ["error"]}, 0, "gather without isolation"),
    "nan_silent": ({2: ["nan"]}, 0, "non-finite logprobs reached the trainer"),
    "endless_retry": ({0: ["refused"]}, 0, "the collection hung"),
    "swallowed_exception": ({1: ["error"]}, 0, "rows [1] have no rollout (lost)"),
    "batch_retry_duplicates": ({1: ["error", "ok"]}, 0, "have more than one rollout (duplicated)"),
    "prefix_passthrough": ({0: ["drift"]}, 0, "prefix drift passed through"),
    "bare_cancelled": ({1: ["error"]}, 0, "the root cause is hidden"),
    "no_deadline": ({3: ["hang"]}, 0, "the collection hung"),  # the last row: the fake runs rows lazily
    "failed_as_completed": ({1: ["error"]}, 0, "the servers saw no successful /run for row 1: HTTP 500"),
    "turns_dropped_on_drift": ({0: ["bad_drift"]}, 0, "turns [1] were dropped"),
    "nan_zeroed": ({2: ["nan", "ok"]}, 0, "hand back logprobs the model never reported"),
    "reward_shifted": ({1: ["error"]}, 0, "row 2: reward 0.0, but the row's /run that generated its turns"),
    "unbounded_retries": ({2: ["nan"]}, 0, "row 2: attempts=5, above max_attempts=3"),
    "empty_epoch": ({row: ["error"] for row in range(4)}, 0, "an empty epoch"),
    "collection_deadline_only": ({}, 1, "every request was answered, so nothing was left to wait for"),
    "detached_after_raise": ({}, 1, "the collector kept working after the collection ended"),
    "drift_fails_batch": ({0: ["drift"]}, 0, "the batch failed for no batch-level cause"),
    "generic_abort": ({1: ["error"]}, 0, "1 aborted rollouts do not name their root cause"),
    "retry_hotter": (
        {2: ["nan", "ok"]},
        0,
        "row 2: attempt 2's /run against attempt 1's: temperature not sent -> 1.3",
    ),
}
# Checked elsewhere: the native-style ones by test_reference_native, the cancelled one by
# test_cancellation, the one whose bug needs the policy's finish reasons in the catalog
# (native-token-limit-truncated), the one whose bug shows only in the fault layer's record of
# its re-sent /runs (resends_timed_out: agent-frozen), the one whose bug needs an agent's exit
# (outage_as_aborted: agent-killed-stays-down), the ones whose bug shows only against the fault
# layer's record of the prompts sent (eos_doubled: prefix-drift) or of each attempt's reward
# (reward_first_attempt: nan-logprobs-retry-rewards), the one whose bug needs GRPO groups (below),
# the one judged against the engine's copy of the rows (retry_edits_caller_rows: nan-logprobs-nan),
# the one whose bug needs tasks interleaved (task_batched_answers: workload-out-of-order), the one
# judged against the layer's record of the /runs in flight (permit_released_twice:
# workload-queued-behind-concurrency) and the one whose bug needs a cancel while a row hangs
# (drains_before_cancel: collection-cancelled-while-a-row-hangs), the one whose bug needs a
# group reward spread (batch_wide_group_filter: group-failure-spares-healthy-groups), the one
# judged against the layer's record of the logprobs it drifted (drift_trained:
# logprob-drift-masked), the ones whose bug needs a /run answer emptied by the layer
# (empty_output_completed: run-answer-emptied), one logprob short of its tokens
# (short_logprobs_trained: run-answers-unreadable) or without its output on every row
# (empty_generation_hint: run-answers-without-output), the native one judged against the layer's
# and the environment's records of the conversation (observation_dropped: native-row-failures),
# the native one whose bug needs the policy killed (policy_lost_per_row: native-policy-killed) and
# the one whose bug shows only in a second collection on the same collector
# (permit_leaked_on_failure: next-step-after-failed-rows, tests/engine/test_next_steps.py, and a
# draw of agent-oom-killed with a second collection in tests/test_fuzz.py), and the one judged
# against the layer's record of when each /run was given up (deadline_split_over_attempts:
# one-row-hangs), and the one whose bug needs turns that stop at a stop string
# (eos_appended_at_stop: turn-ends-at-tool-call).
ELSEWHERE = {
    "per_sample_env",
    "mixed_env_batch",
    "swallows_cancel",
    "length_as_completed",
    "resends_timed_out",
    "outage_as_aborted",
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
    "short_logprobs_trained",
    "empty_generation_hint",
    "observation_dropped",
    "policy_lost_per_row",
    "permit_leaked_on_failure",
    "deadline_split_over_attempts",
    "eos_appended_at_stop",
}
DEADLINE_S = 1.5
# A collection deadline is noticed late only past ends_promptly's margin (3 s): give it room.
SETTINGS: dict[str, dict[str, float]] = {"collection_deadline_only": {"collect_timeout_s": 4.0}}


def _factory(module: str) -> CollectorFactory:
    factory: CollectorFactory = importlib.import_module(f"fixtures.collectors.{module}").factory
    return factory


async def _judge(factory: CollectorFactory, module: str, *, faulty: bool) -> tuple[Status, str]:
    script, short_by, _ = FAULTS[module]
    gym = FakeGym(script if faulty else {})
    gym.short_by = short_by if faulty else 0
    settings = {"request_timeout_s": 1.0, **SETTINGS.get(module, {})}
    ctx = context(gym, **settings)
    observation = await observe(
        factory(ctx),
        rows(4),
        mode="train",
        history=ctx.history,
        deadline_s=DEADLINE_S + settings.get("collect_timeout_s", 0.0),
        request_timeout_s=ctx.settings.request_timeout_s,
        max_attempts=ctx.settings.max_logprob_attempts,
    )
    await asyncio.sleep(0.1)  # whatever the collector left running shows itself
    [verdict] = check_all(observation, [get(KNOWN_BUGS[module])])
    return verdict.status, verdict.render()


def test_every_gym_style_known_bug_has_a_fault_here() -> None:
    assert set(FAULTS) == set(KNOWN_BUGS) - ELSEWHERE


@pytest.mark.asyncio
@pytest.mark.parametrize("module", sorted(FAULTS))
async def test_known_bug_fails_under_its_fault_and_names_the_bug(module: str) -> None:
    status, text = await _judge(_factory(module), module, faulty=True)
    assert status is Status.FAIL, text
    assert FAULTS[module][2] in text


@pytest.mark.asyncio
@pytest.mark.parametrize("module", sorted(FAULTS))
async def test_known_bug_passes_without_the_fault(module: str) -> None:
    status, text = await _judge(_factory(module), module, faulty=False)
    # without the fault some invariants find nothing to judge (no failure to isolate): never a FAIL
    assert status in (Status.PASS, Status.NOT_JUDGED), text


@pytest.mark.asyncio
@pytest.mark.parametrize("module", sorted(FAULTS))
async def test_reference_passes_under_the_same_fault(module: str) -> None:
    status, text = await _judge(reference.factory, module, faulty=True)
    # raise_has_cause has nothing to judge when the reference isolates the row instead of raising
    assert status in (Status.PASS, Status.NOT_JUDGED), text


def _grouped(prompts: int, size: int) -> list[dict[str, object]]:
    """The workload's layout of GRPO groups: each prompt's row repeated ``size`` times."""
    return [
        {**row, "_rowidx": size * at + member}
        for at, row in enumerate(rows(prompts))
        for member in range(size)
    ]


async def _judge_groups(factory: CollectorFactory, script: Mapping[int, Sequence[str]]) -> tuple[Status, str]:
    gym = FakeGym(script)
    ctx = context(gym, request_timeout_s=1.0)
    observation = await observe(
        factory(ctx), _grouped(2, 4), mode="train", history=ctx.history, deadline_s=DEADLINE_S
    )
    [verdict] = check_all(replace(observation, generations_per_prompt=4), [get("groups_intact")])
    return verdict.status, verdict.render()


@pytest.mark.asyncio
async def test_a_placeholder_kept_in_its_group_fails_groups_intact_and_the_reference_drops_the_group() -> (
    None
):
    module = "fixtures.collectors.placeholder_in_group"
    buggy: CollectorFactory = importlib.import_module(module).factory
    status, text = await _judge_groups(buggy, {5: ["error"]})
    assert status is Status.FAIL, text
    assert "group of rows 4..7: 3 members in the train batch, rows [5] left out: row 5 aborted" in text
    assert (await _judge_groups(buggy, {}))[0] is Status.PASS
    status, text = await _judge_groups(reference.factory, {5: ["error"]})
    assert status is Status.PASS, text
