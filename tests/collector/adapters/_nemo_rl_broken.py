"""The ``nemo_rl`` adapter broken on purpose, three times, to show its gate test guards its fidelity.

The first two differ from the real adapter only in the Gym helper they hand NeMo RL's actor:

- ``count_checking`` raises when the Gym client yields fewer results than rows: the check PR
  #2394 adds, done by the adapter instead, so the pre-fix tree looks fixed (green).
- ``padding`` asks the Gym client again for the rows it did not return, so NeMo RL always
  gets every row: no short count ever reaches it, and the fix has nothing to act on.

A third, ``generation_only``, differs only in where it reads the step: the caller's
``final_batch``, as the adapter did before it went on to ``grpo_train``'s ``train_data``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator, Sequence
from typing import Any

from pytest_rollout_chaos.collector.adapters.nemo_rl import NemoRLCollector
from pytest_rollout_chaos.collector.adapters.nemo_rl_final_batch import rollouts_from_batch
from pytest_rollout_chaos.collector.adapters.nemo_rl_trainer import GymHelper
from pytest_rollout_chaos.collector.protocol import Collector, CollectorContext, Rollout, Row, ShortCountError

Result = tuple[dict[str, Any], dict[str, Any]]


class CountCheckingHelper(GymHelper):
    def run_examples(
        self, examples: list[dict[str, Any]], head_server_config: Any = None, semaphore: Any = None
    ) -> Any:
        awaitables = list(super().run_examples(examples, head_server_config, semaphore))
        if len(awaitables) < len(examples):
            raise ShortCountError(
                f"requested {len(examples)} results but the Gym client returned {len(awaitables)}"
            )
        return awaitables


class PaddingHelper(GymHelper):
    def run_examples(
        self, examples: list[dict[str, Any]], head_server_config: Any = None, semaphore: Any = None
    ) -> Any:
        return self._padded(examples, super().run_examples(examples, head_server_config, semaphore))

    def _padded(
        self, examples: list[dict[str, Any]], awaitables: Iterator[Awaitable[Result]]
    ) -> Iterator[Awaitable[Result]]:
        returned: set[int] = set()
        for awaitable in awaitables:
            yield _noting(awaitable, returned)
        # NeMo RL awaits each result before it asks for the next, so every one is in by now.
        missing = [example for example in examples if example["_rowidx"] not in returned]
        if missing:
            yield from super().run_examples(missing, self.head_server_config)


async def _noting(awaitable: Awaitable[Result], returned: set[int]) -> Result:
    row, result = await awaitable
    returned.add(row["_rowidx"])
    return row, result


class CountChecking(NemoRLCollector):
    helper_class = CountCheckingHelper


class Padding(NemoRLCollector):
    helper_class = PaddingHelper


def count_checking(ctx: CollectorContext) -> Collector:
    return CountChecking(ctx)


def padding(ctx: CollectorContext) -> Collector:
    return Padding(ctx)


class GenerationOnly(NemoRLCollector):
    """BROKEN ON PURPOSE: reads the caller's ``final_batch``, never the ``train_data`` that
    ``grpo_train`` makes of it for ``policy.train``."""

    def read(self, rows: Sequence[Row], result: Any, step: Any, *, attempts: int) -> list[Rollout | None]:
        return rollouts_from_batch(rows, result.final_batch, attempts=attempts)


def generation_only(ctx: CollectorContext) -> Collector:
    """``--rollout-chaos-target=tests.collector.adapters._nemo_rl_broken:generation_only``."""
    return GenerationOnly(ctx)
