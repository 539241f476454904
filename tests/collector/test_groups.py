"""GRPO groups among the rows: runs of consecutive rows equal but for ``_rowidx``."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_rollout_chaos.collector.groups import group_size, prompt_groups


def laid_out(prompts: str, size: int) -> list[dict[str, Any]]:
    """The workload's layout: each prompt repeated ``size`` times, ``_rowidx`` 0..N-1."""
    return [{"q": q, "_rowidx": size * p + g} for p, q in enumerate(prompts) for g in range(size)]


def test_each_prompt_repeated_is_one_group_in_order() -> None:
    rows = laid_out("ab", 4)
    assert prompt_groups(rows) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert group_size(rows, setting="rollout.n") == 4


def test_distinct_rows_are_groups_of_one_and_no_rows_give_size_one() -> None:
    assert prompt_groups(laid_out("abc", 1)) == [[0], [1], [2]]
    assert group_size(laid_out("abc", 1), setting="rollout.n") == 1
    assert group_size([], setting="rollout.n") == 1


def test_groups_of_different_sizes_name_the_trainer_setting() -> None:
    rows = [{"q": q, "_rowidx": i} for i, q in enumerate("aab")]
    with pytest.raises(ValueError, match=r"groups of sizes \[1, 2\], but the trainer generates rollout.n"):
        group_size(rows, setting="rollout.n")
