"""The ``final_batch`` of NeMo RL's NeMo Gym caller read as Rollouts: the step's generation alone,
before ``grpo_train`` makes a train batch of it.

The ``nemo_rl`` adapter reads its rows from that train batch's ``train_data``
(``nemo_rl_train_batch``); this read-out is for a collector that stops at the rollout (the adapter
broken on purpose, ``generation_only``, that its gate test tells from the real one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_rollout_chaos.collector.protocol import Rollout, Row, Turn, row_index


def rollouts_from_batch(rows: Sequence[Row], final_batch: Any, *, attempts: int) -> list[Rollout | None]:
    """One Rollout per row of ``final_batch`` (input order); a row it lacks stays ``None``."""
    logs = list(final_batch["message_log"])
    rewards = _values(final_batch["total_reward"])
    truncated = _values(final_batch["truncated"])
    out: list[Rollout | None] = []
    for position, row in enumerate(rows):
        log = logs[position] if position < len(logs) else None
        if log is None:
            out.append(None)
            continue
        out.append(
            Rollout(
                row_index=row_index(row, position),
                status="truncated" if bool(truncated[position]) else "completed",
                reward=float(rewards[position]),
                turns=turns_from_message_log(log),
                attempts=attempts,
            )
        )
    return out


def turns_from_message_log(log: Sequence[Any]) -> list[Turn]:
    """One Turn per assistant message; its prompt is every token that comes before it."""
    seen: list[int] = []
    turns = []
    for message in log:
        ids = [int(token) for token in _values(message["token_ids"])]
        if message["role"] == "assistant":
            logprobs = message.get("generation_logprobs")
            turns.append(
                Turn(
                    prompt_token_ids=list(seen),
                    generation_token_ids=ids,
                    generation_log_probs=[] if logprobs is None else [float(v) for v in _values(logprobs)],
                )
            )
        seen.extend(ids)
    return turns


def _values(data: Any) -> list[Any]:
    """A tensor's or a list's items as plain Python values."""
    tolist = getattr(data, "tolist", None)
    return list(tolist()) if callable(tolist) else list(data)
