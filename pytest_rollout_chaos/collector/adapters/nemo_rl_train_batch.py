"""NeMo RL's GRPO step past the rollout, to the ``train_data`` its ``policy.train`` would get, and
the Rollouts read from it.

``grpo_train`` runs NeMo RL's own functions on the caller's result (rewards, baselines, dynamic
sampling, loss masks, the flat ``train_data``, advantages) with a few lines of its own between
them, which the adapter runs as copied. The copy is true only where ``grpo_train`` is the function
it was copied from, so there is one copy per version of it (``STEPS``, one module each:
``nemo_rl_step_3eebe4da`` for the trees before NeMo RL #3000, ``nemo_rl_step_7ea279ab`` for main),
and ``COPIED`` picks the one whose fingerprint is the tree's (``copied``). On a tree whose
``grpo_train`` is none of them the adapter declines train-mode scenarios as not judged, naming
the function, file and line, and never runs a stale copy. Each step module says what it runs and
what it stands in (its ``STOOD_IN``, recorded with each call).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters import nemo_rl_step_3eebe4da, nemo_rl_step_7ea279ab
from pytest_rollout_chaos.collector.adapters.copied import Versions
from pytest_rollout_chaos.collector.adapters.nemo_rl_grpo import GRPO_MODULE, TrainBatch, load_grpo
from pytest_rollout_chaos.collector.protocol import Rollout, Row, Turn, row_index

__all__ = ["COPIED", "GRPO_MODULE", "STEPS", "TrainBatch", "load_grpo", "rollouts", "step", "train_batch"]

STEPS: Final[tuple[ModuleType, ...]] = (nemo_rl_step_3eebe4da, nemo_rl_step_7ea279ab)
"""One copy of ``grpo_train``'s step per version of it, oldest first."""
COPIED: Final = Versions(tuple(module.COPIED for module in STEPS))
"""The function those copies run lines of, and which copy each tree needs."""


def step() -> ModuleType:
    """The step module for the tree in use; ``NotJudgedError`` when no copy holds for it."""
    chosen = COPIED.require()
    return next(module for module in STEPS if chosen == module.COPIED)


def train_batch(
    step_module: ModuleType, result: Any, master_config: Any, tokenizer: Any, policy: Any
) -> TrainBatch:
    """``grpo_train``'s steps from the caller's result to the ``train_data`` of ``policy.train``, as
    ``step_module`` copies them, ``policy`` asked for the logprobs (``nemo_rl_policy``); what NeMo
    RL raises on the way is raised, unchanged."""
    made: TrainBatch = step_module.train_batch(load_grpo(), result, master_config, tokenizer, policy)
    return made


def rollouts(rows: Sequence[Row], batch: TrainBatch, *, attempts: int) -> list[Rollout | None]:
    """One Rollout per row, read from the ``train_data`` (row order, as ``final_batch`` keeps it).

    The tokens, loss mask and logprobs are the flat tensors ``policy.train`` gets, cut at the
    message boundaries of the batch's message logs: each message whose tokens are all in the
    loss mask is one turn, its prompt every token before it. The reward is the one the advantages
    were computed from; ``truncated`` the batch's. Every row is in the train batch: NeMo RL trains
    on each (a zero ``sample_mask`` zeroes its loss, not its reward in the baseline). Its
    ``loss_mask`` is the loss's own over the turns' tokens, ``token_mask`` times ``sample_mask``:
    all zero for a row NeMo RL masked (the overlong filter, the sequence-logprob error threshold).
    A row the batch lacks stays ``None``; when dynamic sampling leaves the batch incomplete, no
    row is trained in this step.
    """
    repeated = batch.repeated_batch
    logs = list(repeated["message_log"])
    truncated = _values(repeated["truncated"])
    rewards = _values(batch.rewards)
    out: list[Rollout | None] = []
    for position, row in enumerate(rows):
        if position >= len(logs) or logs[position] is None:
            out.append(None)
            continue
        made = Rollout(
            row_index=row_index(row, position),
            status="truncated" if bool(truncated[position]) else "completed",
            reward=float(rewards[position]),
            turns=[] if batch.train_data is None else _turns(batch.train_data, position, logs[position]),
            attempts=attempts,
            in_train_batch=batch.complete,
            loss_mask=None if batch.train_data is None else _loss_mask(batch.train_data, position),
        )
        out.append(made)
    return out


def _turns(train_data: Any, position: int, log: Sequence[Any]) -> list[Turn]:
    length = int(train_data["input_lengths"][position])
    tokens = [int(v) for v in _values(train_data["input_ids"][position])[:length]]
    mask = [int(v) for v in _values(train_data["token_mask"][position])[:length]]
    logprobs = [float(v) for v in _values(train_data["generation_logprobs"][position])[:length]]
    turns = []
    start = 0
    for message in log:
        end = start + len(_values(message["token_ids"]))
        if end > start and all(mask[start:end]):
            turns.append(
                Turn(
                    prompt_token_ids=tokens[:start],
                    generation_token_ids=tokens[start:end],
                    generation_log_probs=logprobs[start:end],
                )
            )
        start = end
    return turns


def _loss_mask(train_data: Any, position: int) -> list[int]:
    """The loss's mask over the row's response tokens: ``token_mask * sample_mask`` (what
    ``grpo_train`` hands the advantage estimator and the loss), where ``token_mask`` is 1."""
    length = int(train_data["input_lengths"][position])
    tokens = [int(v) for v in _values(train_data["token_mask"][position])[:length]]
    weight = 1 if float(_values(train_data["sample_mask"])[position]) > 0 else 0
    return [weight for flag in tokens if flag]


def _values(data: Any) -> list[Any]:
    """A tensor's or a list's items as plain Python values."""
    tolist = getattr(data, "tolist", None)
    return list(tolist()) if callable(tolist) else list(data)
