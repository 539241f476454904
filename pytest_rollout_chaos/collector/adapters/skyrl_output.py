"""SkyRL's ``GeneratorOutput`` read back by the ``skyrl`` adapter: one Rollout per row, in row order.

``stop_reasons``: ``stop`` is completed, ``length`` truncated, ``rollout_error`` (PR #1986's
placeholder) aborted with what SkyRL logged for that rollout, any other reason aborted naming it.
Each run of loss-mask 1 in ``response_ids`` is one turn's generation, its logprobs the matching
``rollout_logprobs``, its prompt ``prompt_token_ids`` plus every response token before it. The
reward is the sum of the token-level ``rewards`` (a float reward is taken as it is).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from typing import Any, Final

from pytest_rollout_chaos.collector.protocol import Rollout, RolloutStatus, Turn

PLACEHOLDER_STOP_REASON: Final = "rollout_error"
_FAILED_ROLLOUT = re.compile(r"^Rollout (\d+) failed with (.*?)\. Substituting a placeholder", re.DOTALL)
_STATUS: Final[dict[str, RolloutStatus]] = {"stop": "completed", "length": "truncated"}


def rollout_of(output: Any, position: int, index: int, failures: LoggedFailures) -> Rollout:
    """Row ``position`` of SkyRL's ``GeneratorOutput`` as a Rollout (module docstring: the mapping)."""
    stop_reason = output["stop_reasons"][position]
    response = list(output["response_ids"][position])
    mask = list(output["loss_masks"][position])
    all_logprobs = output["rollout_logprobs"]
    logprobs = list(all_logprobs[position]) if all_logprobs is not None else []
    prompt = list(output["prompt_token_ids"][position])
    reward = output["rewards"][position]
    turns = [
        Turn(prompt + response[:start], response[start:end], logprobs[start:end])
        for start, end in mask_runs(mask)
    ]
    total = float(sum(reward)) if isinstance(reward, list) else float(reward)
    status = _STATUS.get(stop_reason, "aborted")
    error = None
    if stop_reason == PLACEHOLDER_STOP_REASON:
        cause = failures.about(position)
        error = (
            f"SkyRL replaced row {index} by a placeholder trajectory (stop_reason={stop_reason!r}, "
            f"{len(response)} response token, loss mask {mask}, reward {total}): "
            + (f"rollout {position} failed with {cause}" if cause else "SkyRL logged no cause for it")
        )
    elif status == "aborted":
        error = f"SkyRL handed back row {index} with stop_reason {stop_reason!r}"
    return Rollout(row_index=index, status=status, reward=total, turns=turns, error=error)


def mask_runs(mask: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of ones: the model's generations inside a SkyRL response."""
    runs = []
    start: int | None = None
    for position, flag in enumerate([*mask, 0]):
        if flag and start is None:
            start = position
        elif not flag and start is not None:
            runs.append((start, position))
            start = None
    return runs


class LoggedFailures:
    """What SkyRL's generator logs (loguru) about each failed rollout while a batch runs."""

    def __init__(self) -> None:
        self.causes: dict[int, str] = {}

    def listening(self) -> Any:
        loguru: Any = importlib.import_module("loguru")
        failures = self

        class Listening:
            def __enter__(self) -> None:
                self.sink = loguru.logger.add(failures.record, level="WARNING", format="{message}")

            def __exit__(self, *exc: object) -> None:
                loguru.logger.remove(self.sink)

        return Listening()

    def record(self, message: Any) -> None:
        found = _FAILED_ROLLOUT.match(str(message.record["message"]))
        if found is not None:
            self.causes.setdefault(int(found.group(1)), found.group(2))

    def about(self, position: int) -> str | None:
        return self.causes.get(position)
