"""GRPO groups among the requested rows: which rows are one prompt's generations.

A trainer generates ``n`` samples per prompt as one group (slime's ``n_samples_per_prompt``,
NeMo RL's ``num_generations_per_prompt``, verl's ``rollout.n``, SkyRL's ``n_samples_per_prompt``)
and computes each sample's advantage against its group's rewards. The rows a collector gets are
laid out prompt by prompt, each repeated once per generation with its own ``_rowidx``
(``workload.generations_per_prompt``), so consecutive rows that are equal but for ``_rowidx`` are
one group. The judge keeps its own rule (``invariants.groups_intact``) and never reads this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_rollout_chaos.collector.protocol import Row


def prompt_groups(rows: Sequence[Row]) -> list[list[int]]:
    """The positions of each group, in order: runs of consecutive rows equal but for ``_rowidx``."""
    groups: list[list[int]] = []
    previous: dict[str, Any] | None = None
    for position, row in enumerate(rows):
        prompt = {key: value for key, value in row.items() if key != "_rowidx"}
        if groups and prompt == previous:
            groups[-1].append(position)
        else:
            groups.append([position])
        previous = prompt
    return groups


def group_size(rows: Sequence[Row], *, setting: str) -> int:
    """The one size every group has (1 for no rows); a ValueError naming the trainer's ``setting``
    when the groups differ in size, since a trainer has one group size for the whole batch."""
    sizes = sorted({len(group) for group in prompt_groups(rows)})
    if len(sizes) > 1:
        raise ValueError(
            f"the rows make groups of sizes {sizes}, but the trainer generates {setting} samples for "
            "every prompt; give every prompt the same number of generations (workload.generations_per_prompt)"
        )
    return sizes[0] if sizes else 1
