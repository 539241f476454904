"""The ``slime`` adapter broken on purpose: it stops at ``generate_and_rm_group`` again.

``GenerationOnlySlimeCollector`` differs from the real adapter only in where it reads the step:
from the groups ``generate_and_rm_group`` returned, each element read back on its own (a PR
#2078 placeholder comes back as an aborted row, left to no train batch), instead of from the
train data slime's ``RolloutManager`` makes of them. What slime does past generation is never run,
so the head tree's ``AttributeError`` on the placeholder list never fires and its step looks
isolated; ``test_slime`` shows the verdicts that tell the two adapters apart.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from pytest_rollout_chaos.collector.adapters import slime, slime_train_data
from pytest_rollout_chaos.collector.protocol import Collector, CollectorContext, Rollout


class GenerationOnlySlimeCollector(slime.SlimeCollector):
    """BROKEN ON PURPOSE: reads the groups of ``generate_and_rm_group``, never slime's train data."""

    def read(
        self, args: Namespace, finished: list[list[Any]], crashes: slime_train_data.CrashLog
    ) -> list[Rollout]:
        return [slime_train_data.read_back(element, crashes) for group in finished for element in group]


def generation_only(ctx: CollectorContext) -> Collector:
    """``--rollout-chaos-target=tests.collector.adapters._slime_broken:generation_only``."""
    return GenerationOnlySlimeCollector(ctx)
