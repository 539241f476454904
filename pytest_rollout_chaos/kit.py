"""The reference collector's pieces, for a collector of your own: ``from pytest_rollout_chaos import kit``.

Each name here is what the reference collector itself runs (the same object, not a copy), kept
stable like ``__all__``: reading a NeMo Gym ``/run`` result into ``Turn``s and a status, the checks
a rollout needs before it is handed on, EOS-boundary splicing of drifted prompts, GRPO groups,
waiting for the policy, telling a gone agent from a slow one, and naming a root cause. None of
them applies a deadline or writes a verdict: the collector decides what a problem means for its
row or its batch. The invariants judge with their own code, never with these.
"""

from __future__ import annotations

from pytest_rollout_chaos.collector.failures import all_or_first_error, is_unreachable, root_cause
from pytest_rollout_chaos.collector.groups import prompt_groups
from pytest_rollout_chaos.collector.outage import Probes as AgentProbes
from pytest_rollout_chaos.collector.prefix import SpliceError, repair_turns
from pytest_rollout_chaos.collector.protocol import CollectorContext
from pytest_rollout_chaos.collector.readiness import PolicyNotReadyError
from pytest_rollout_chaos.collector.readiness import wait_for_policy as _wait_for_policy
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.collector.results import (
    MalformedResultError,
    bad_logprob,
    prefix_mismatch,
    reward_of,
    status_of,
    turns_from_result,
)

__all__ = [
    "AgentProbes",
    "MalformedResultError",
    "PolicyNotReadyError",
    "ReferenceCollector",
    "SpliceError",
    "all_or_first_error",
    "bad_logprob",
    "is_unreachable",
    "prefix_mismatch",
    "prompt_groups",
    "repair_turns",
    "reward_of",
    "root_cause",
    "status_of",
    "turns_from_result",
    "wait_for_policy",
]


async def wait_for_policy(ctx: CollectorContext) -> None:
    """Return once the policy's ``/health`` answers ready; raise ``PolicyNotReadyError`` (an
    ``InfrastructureError``) after ``ctx.settings.policy_ready_timeout_s``. A wait is recorded in
    ``ctx.history`` (``collector info policy_ready``)."""
    await _wait_for_policy(ctx, ctx.history)
