"""Reading a NeMo Gym ``/run`` result into Turns, and the checks a collector runs on them.

Only the last output item of each model call carries ``prompt_token_ids``,
``generation_token_ids`` and ``generation_log_probs`` (NeMo Gym's contract); every such item
is one Turn. The checks return a reason string (or None) so that a collector can put the
reason on an aborted Rollout, and the known-bug collectors can skip them.

The invariants judge the same rules with their own code (``invariants/rules.py``); these are
the collector's copies, kept apart on purpose so that a bug here is caught there, not shared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_rollout_chaos.collector.protocol import Rollout, RolloutStatus, Turn

TOKEN_KEYS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


class MalformedResultError(ValueError):
    """A ``/run`` result lacks what the protocol promises (response, output, token fields)."""


def turns_from_result(result: Mapping[str, Any]) -> list[Turn]:
    """The model calls of one trajectory, in order; raise ``MalformedResultError`` if unreadable."""
    response = result.get("response")
    if not isinstance(response, Mapping):
        raise MalformedResultError(f"result has no 'response' object (keys: {sorted(result)})")
    output = response.get("output")
    if not isinstance(output, list):
        raise MalformedResultError("result.response has no 'output' list")
    turns = []
    for item in output:
        if not isinstance(item, Mapping) or not item.get("generation_token_ids"):
            continue
        try:
            turns.append(
                Turn(
                    prompt_token_ids=[int(token) for token in item["prompt_token_ids"]],
                    generation_token_ids=[int(token) for token in item["generation_token_ids"]],
                    generation_log_probs=list(item.get("generation_log_probs") or []),
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise MalformedResultError(f"output item with unreadable token fields: {error}") from error
    if not turns:
        raise MalformedResultError("result carries no generation data (no output item has token ids)")
    return turns


def status_of(result: Mapping[str, Any]) -> RolloutStatus:
    """``truncated`` when the last model call stopped at max_output_tokens, else ``completed``."""
    response = result.get("response")
    details = response.get("incomplete_details") if isinstance(response, Mapping) else None
    if isinstance(details, Mapping) and details.get("reason") == "max_output_tokens":
        return "truncated"
    return "completed"


def reward_of(result: Mapping[str, Any]) -> float:
    value = result.get("reward", 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


def rollout_from_result(
    row_index: int, result: Mapping[str, Any], *, attempts: int = 1, turns: list[Turn] | None = None
) -> Rollout:
    """A Rollout from a ``/run`` result, with no checks (what a trusting collector does)."""
    return Rollout(
        row_index=row_index,
        status=status_of(result),
        reward=reward_of(result),
        turns=turns_from_result(result) if turns is None else turns,
        attempts=attempts,
    )


def aborted(row_index: int, error: str, *, attempts: int = 1, turns: Sequence[Turn] = ()) -> Rollout:
    return Rollout(row_index, "aborted", 0.0, list(turns), error, attempts)


def bad_logprob(turns: Sequence[Turn]) -> str | None:
    """Where the first NaN, Inf or null logprob is, or None when all are finite numbers."""
    for turn_index, turn in enumerate(turns):
        if len(turn.generation_log_probs) != len(turn.generation_token_ids):
            return (
                f"turn {turn_index} has {len(turn.generation_log_probs)} logprobs for "
                f"{len(turn.generation_token_ids)} generated tokens"
            )
        for position, value in enumerate(turn.generation_log_probs):
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                return f"non-finite logprob {value!r} at turn {turn_index}, token {position}"
    return None


def prefix_mismatch(turns: Sequence[Turn]) -> str | None:
    """The first turn whose prompt does not start with the previous prompt + generation."""
    for index in range(1, len(turns)):
        expected = turns[index - 1].prompt_token_ids + turns[index - 1].generation_token_ids
        prompt = turns[index].prompt_token_ids
        if prompt[: len(expected)] != expected:
            first = next(
                (i for i, (a, b) in enumerate(zip(expected, prompt, strict=False)) if a != b),
                min(len(expected), len(prompt)),
            )
            return (
                f"prefix mismatch at turn {index}: prompt ids differ from turn {index - 1}'s "
                f"prompt + generation at position {first} (of {len(expected)})"
            )
    return None
