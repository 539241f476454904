"""The rows a scenario's workload asks for: ids numbered task by task, groups handed over in order."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_rollout_chaos.engine.workload import build_rows
from pytest_rollout_chaos.scenario.model import Workload


class _Datasets:
    """The Gym stack's ``rows``: each task's prompts, numbered within the task."""

    def rows(self, task: str, n: int) -> list[dict[str, Any]]:
        return [{"agent_ref": {"name": task}, "prompt": f"{task}{i}", "_rowidx": i} for i in range(n)]


def _laid_out(**workload: Any) -> list[tuple[int, str]]:
    base = {"rows_per_task": 2, "generations_per_prompt": 2, "tasks": ("calculator", "echo")}
    rows = build_rows(Workload(**{**base, **workload}), _Datasets())  # type: ignore[arg-type]
    return [(row["_rowidx"], row["prompt"]) for row in rows]


def test_by_default_ids_are_positions_and_rows_go_task_by_task() -> None:
    assert _laid_out() == [
        (0, "calculator0"), (1, "calculator0"), (2, "calculator1"), (3, "calculator1"),
        (4, "echo0"), (5, "echo0"), (6, "echo1"), (7, "echo1"),
    ]  # fmt: skip


def test_interleaved_sparse_ids_keep_each_group_together_and_its_task_by_task_numbers() -> None:
    assert _laid_out(row_ids="sparse", order="interleaved") == [
        (7, "calculator0"), (10, "calculator0"), (19, "echo0"), (22, "echo0"),
        (13, "calculator1"), (16, "calculator1"), (25, "echo1"), (28, "echo1"),
    ]  # fmt: skip


@pytest.mark.parametrize("row_ids", ["positions", "offset", "sparse"])
def test_a_shuffle_is_the_same_every_time_and_moves_whole_groups(row_ids: str) -> None:
    shuffled = _laid_out(row_ids=row_ids, order="shuffled")
    assert shuffled == _laid_out(row_ids=row_ids, order="shuffled")
    assert sorted(shuffled) == sorted(_laid_out(row_ids=row_ids))
    assert shuffled != _laid_out(row_ids=row_ids)
    pairs = [shuffled[i : i + 2] for i in range(0, len(shuffled), 2)]
    assert all(first[1] == second[1] for first, second in pairs)
    assert min(index for index, _ in _laid_out(row_ids="offset")) == 1000
