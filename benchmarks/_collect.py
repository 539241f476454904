"""One timed collection over a running stack, as the scenario runner does it: in its own trial."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_rollout_chaos.collector.protocol import CollectorFactory, CollectorSettings, Mode, Rollout
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.gym.stack import GymStack
from pytest_rollout_chaos.stack import ChaosStack
from pytest_rollout_chaos.trial import open_trial


@dataclass(frozen=True, slots=True)
class Collected:
    """What one collection returned (or raised), how long it took, and its History."""

    rollouts: list[Rollout] | None
    raised: BaseException | None
    elapsed_s: float
    history: History


def greedy_rows(gym: GymStack, task: str, n: int) -> list[dict[str, Any]]:
    """``n`` rows of ``task`` sampled greedily, so repeated collections do the same work."""
    rows = gym.rows(task, n)
    for row in rows:
        row["responses_create_params"]["temperature"] = 0.0
    return rows


async def collect(
    stack: ChaosStack,
    factory: CollectorFactory,
    rows: Sequence[dict[str, Any]],
    *,
    settings: CollectorSettings,
    mode: Mode = "train",
) -> Collected:
    """Collect ``rows`` once with ``factory``'s collector; never raises what the collector raised."""
    async with open_trial(stack, settings=settings) as trial:
        collector = factory(trial.collector)
        began = time.perf_counter()
        try:
            rollouts = await collector.collect(rows, mode=mode)
        except Exception as error:
            return Collected(None, error, time.perf_counter() - began, trial.history)
        return Collected(list(rollouts), None, time.perf_counter() - began, trial.history)


def require_rollouts(collected: Collected, what: str) -> list[Rollout]:
    """The rollouts, or a clear error: a benchmark of a failed collection measures nothing."""
    if collected.rollouts is None:
        raise RuntimeError(f"{what}: the collection raised {collected.raised!r}; nothing to measure")
    aborted = [rollout.error for rollout in collected.rollouts if rollout.status == "aborted"]
    if aborted:
        raise RuntimeError(f"{what}: {len(aborted)} rollouts aborted, e.g. {aborted[0]}")
    return collected.rollouts
