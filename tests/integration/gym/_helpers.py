"""Shared helpers for the Gym integration tests: running rows and reading model calls out of results."""

from __future__ import annotations

from typing import Any

from pytest_rollout_chaos.collector.gym_client import GymClient
from pytest_rollout_chaos.servers.gym.convert import TOKEN_FIELDS
from pytest_rollout_chaos.servers.gym.stack import GymStack


async def run_rows(
    stack: GymStack, rows: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every row through the agents (via the head server), results in completion order."""
    async with GymClient(stack.head_url, timeout_s=60.0) as client:
        return [await awaitable for awaitable in client.run_examples(rows)]


def with_temperature(rows: list[dict[str, Any]], temperature: float) -> list[dict[str, Any]]:
    """Set the sampling temperature as trainers do, per row."""
    for row in rows:
        row["responses_create_params"]["temperature"] = temperature
    return rows


def model_calls(output: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The output items grouped by model call (tool outputs separate the calls)."""
    calls: list[list[dict[str, Any]]] = [[]]
    for item in output:
        if item["type"] == "function_call_output":
            calls.append([])
        else:
            calls[-1].append(item)
    return [call for call in calls if call]


def token_items(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items that carry token fields, one per model call."""
    return [item for item in output if all(field in item for field in TOKEN_FIELDS)]
