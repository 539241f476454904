"""Batched validation speedup: the reference collector's native validation vs per-sample env evaluation.

B rows go through the native style in validation mode against an environment costing
``PER_CALL_MS`` per ``/step_batch`` call plus ``PER_ITEM_MS`` per item (``GymStack.set_env_latency``).
The reference collector makes one ``env.step`` per task group per turn; the known-bug collector
``fixtures/collectors/per_sample_env.py`` makes one per sample, one after another (NeMo RL
#1798). Reported: the wall time of each collection and their ratio (goal at least 10x), the
time the environment itself took (from the resources server's ``/step_batch`` request events),
and the ``env.step`` call counts the resources server served (its ``step_batch`` events).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks._collect import collect, greedy_rows, require_rollouts
from benchmarks._result import Number, Result
from benchmarks._stack import builder, stack_of
from pytest_rollout_chaos.collector.protocol import CollectorFactory, CollectorSettings
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.gym.stack import GymStack, direct_link
from pytest_rollout_chaos.servers.policy.spec import PolicyServer

GOAL_SPEEDUP = 10.0
PER_CALL_MS = 20.0
PER_ITEM_MS = 1.0
SETTINGS = CollectorSettings(
    request_timeout_s=120.0,
    collect_timeout_s=600.0,
    style="native",
    max_turns=3,
    max_new_tokens=64,
    temperature=0.0,
)
PER_SAMPLE_MODULE = "fixtures.collectors.per_sample_env"


@dataclass(frozen=True, slots=True)
class _Measured:
    wall_s: float
    env_s: float
    env_calls: int
    env_items: int


def run(*, batch: int = 64) -> Result:
    per_sample: CollectorFactory = importlib.import_module(PER_SAMPLE_MODULE).factory
    with tempfile.TemporaryDirectory(prefix="bench-batched-") as log_dir, contextlib.ExitStack() as stack:
        root = Path(log_dir)
        gym = builder(stack, root, links=direct_link).gym
        batched = _measure_with_fresh_policy(root, gym, ReferenceCollector, batch, "batched (reference)")
        serial = _measure_with_fresh_policy(root, gym, per_sample, batch, "per-sample")
    return Result(
        "batched_validation",
        (
            Number("batched wall", batched.wall_s, "s"),
            Number("per-sample wall", serial.wall_s, "s"),
            Number("wall speedup", serial.wall_s / batched.wall_s, "x", GOAL_SPEEDUP, "at_least"),
            Number("batched env time", batched.env_s, "s"),
            Number("per-sample env time", serial.env_s, "s"),
            Number("env time speedup", serial.env_s / batched.env_s, "x", GOAL_SPEEDUP, "at_least"),
            Number("batched env.step calls", batched.env_calls, "calls"),
            Number("per-sample env.step calls", serial.env_calls, "calls"),
        ),
        details={
            "batch": batch,
            "per_call_ms": PER_CALL_MS,
            "per_item_ms": PER_ITEM_MS,
            "env_items": {"batched": batched.env_items, "per_sample": serial.env_items},
        },
    )


def _measure_with_fresh_policy(
    log_dir: Path, gym: GymStack, factory: CollectorFactory, batch: int, what: str
) -> _Measured:
    """A policy server of its own, started with the same seed: both collectors then sample the same
    tokens (native requests carry no seed, so the server's seed sequence decides), so the two
    collections do the same generation work and differ only in how they call the environment.
    """
    with contextlib.ExitStack() as own:
        policy = builder(own, log_dir / what.split(maxsplit=1)[0]).policy_replicas[0]
        return asyncio.run(_measure(gym, policy, factory, batch, what))


async def _measure(
    gym: GymStack, policy: PolicyServer, factory: CollectorFactory, batch: int, what: str
) -> _Measured:
    gym.reset_state()
    gym.set_env_latency(per_call_ms=PER_CALL_MS, per_item_ms=PER_ITEM_MS)
    rows = greedy_rows(gym, "calculator", batch)
    collected = await collect(stack_of(policy, gym), factory, rows, settings=SETTINGS, mode="validation")
    require_rollouts(collected, f"batched validation ({what})")
    served = collected.history.events(source="resources", op="step_batch")
    return _Measured(
        wall_s=collected.elapsed_s,
        env_s=_env_seconds(collected.history),
        env_calls=len(served),
        env_items=sum(int(event.data.get("batch_size", 0)) for event in served),
    )


def _env_seconds(history: History) -> float:
    """Seconds the resources server spent in ``/step_batch`` calls, summed over calls: each call's
    ``info step_batch`` (on arrival) to its ``ok step_batch_rewards`` (on answering). Calls overlap
    and carry no request id, but a sum of differences is the difference of the sums, whichever
    start goes with whichever end; so every call must have ended."""
    began = [event.t for event in history.events(source="resources", op="step_batch")]
    ended = [event.t for event in history.events(source="resources", op="step_batch_rewards")]
    if len(began) != len(ended):
        raise RuntimeError(f"{len(began)} step_batch calls began but {len(ended)} answered")
    return sum(ended) - sum(began)
