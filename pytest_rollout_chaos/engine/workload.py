"""What the collector under test is handed for a scenario: its rows and its settings.

Both follow from the scenario alone (the rows also from the Gym stack's datasets), once per run:
``build_rows`` lays the workload's rows out (their ids by ``workload.row_ids``, their groups in
``workload.order``) and fills them from the datasets; ``collector_settings`` scales the
collector's own limits to the scenario's deadline. The engine hands both down, and the judge
reads the same settings back.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Final, TypeVar

from pytest_rollout_chaos.collector.protocol import CollectorSettings
from pytest_rollout_chaos.scenario.model import Scenario, Workload
from pytest_rollout_chaos.servers.gym.stack import GymStack

ROW_ID_SCHEMES: Final = {"positions": (0, 1), "offset": (1000, 1), "sparse": (7, 3)}  # first id, step

_Group = TypeVar("_Group")


def build_rows(workload: Workload, gym: GymStack) -> list[dict[str, Any]]:
    """The requested rows: each task's rows, each repeated per generation (one prompt's group), with
    the workload's token limit in their ``responses_create_params`` when it sets one. ``_rowidx``
    follow ``workload.row_ids`` in the task-by-task layout; the groups are then handed over in
    ``workload.order``, so under ``interleaved`` or ``shuffled`` the ids run out of list order."""
    first, step = ROW_ID_SCHEMES[workload.row_ids]
    count, size = workload.rows_per_task, workload.generations_per_prompt
    # each group's place in the task-by-task layout, in the order the groups are handed over
    layout = [[task * count + index for index in range(count)] for task in range(len(workload.tasks))]
    handed = _in_order(layout, workload.order)
    given = [row for task in workload.tasks for row in gym.rows(task, count)]
    tokens = workload.max_output_tokens
    limit = {} if tokens is None else {"max_output_tokens": tokens}
    limited = [
        {**given[place], "responses_create_params": {**given[place]["responses_create_params"], **limit}}
        if limit
        else given[place]
        for place in handed
    ]
    return [
        {**row, "_rowidx": first + step * (place * size + copy)}
        for place, row in zip(handed, limited, strict=True)
        for copy in range(size)
    ]


def _in_order(per_task: list[list[_Group]], order: str) -> list[_Group]:
    """The groups of every task in ``order``: task by task, one of each task in turn, or a fixed shuffle."""
    if order == "interleaved":
        rounds = max((len(groups) for groups in per_task), default=0)
        return [groups[turn] for turn in range(rounds) for groups in per_task if turn < len(groups)]
    flat = [group for groups in per_task for group in groups]
    if order == "shuffled":
        random.Random(len(flat)).shuffle(flat)  # the same shuffle every run of the scenario
    return flat


def collector_settings(scenario: Scenario) -> CollectorSettings:
    """The collector's own limits, scaled to the scenario's deadline so it can fail inside it."""
    within_s = scenario.expect.within_s
    settings = CollectorSettings(
        request_timeout_s=max(1.0, min(30.0, within_s / 4)),
        collect_timeout_s=max(1.0, within_s * 0.9),
        policy_ready_timeout_s=max(1.0, within_s / 2),
        style=scenario.workload.style,
        stop=scenario.stack.policy.stop,
        trainer_config=scenario.workload.trainer_config,
    )
    workload = scenario.workload
    if workload.max_concurrency is not None:
        settings = dataclasses.replace(settings, max_concurrency=workload.max_concurrency)
    tokens = workload.max_output_tokens
    return settings if tokens is None else dataclasses.replace(settings, max_new_tokens=tokens)
