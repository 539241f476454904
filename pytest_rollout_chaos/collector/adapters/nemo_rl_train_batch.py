"""NeMo RL's GRPO step past the rollout, to the ``train_data`` its ``policy.train`` would get.

``grpo_train`` (``nemo_rl/algorithms/grpo.py``, lines 1515-1812 at the pinned trees 3eebe4da,
964b609a and 3069f281, one line later at c6a661e8) takes the caller's ``AsyncNemoGymRolloutResult``
and, before the optimizer step, runs: ``rollout_metrics["mean_gen_tokens_per_sample"]`` (1577),
``scale_rewards`` (1581), ``apply_reward_shaping`` when enabled,
``calculate_baseline_and_std_per_prompt`` (1613), ``dynamic_sampling`` (1624),
``_extract_prompt_only_messages`` and ``batched_message_log_to_flat_message`` for the prompt ids
(1659-1663), the overlong filter and the loss masks (1674-1697),
``batched_message_log_to_flat_message`` again to the ``train_data`` ``BatchedDataDict``
(1700-1726), the policy's logprobs (1747), ``compute_and_apply_seq_logprob_error_masking`` (1768)
and ``adv_estimator.compute_advantage`` (1784). Every named function above is NeMo RL's
own, called with what ``grpo_train`` passes it; what one raises is what ``train_batch`` raises.

The copied block is true only where ``grpo_train`` is the function it was copied from: ``COPIED``
holds that function's fingerprint at the pinned trees (``copied``), and on a tree whose
``grpo_train`` differs (NeMo RL #3000 and later: ``dynamic_sampling`` reads ``master_config.grpo``,
``_extract_prompt_only_messages`` is gone, ``_apply_mask_sample_filter`` is new) the adapter
declines train-mode scenarios as not judged, naming the function, file and line, and never runs
the stale copy.

What is stood in (``STOOD_IN``, recorded with each call):

- ``grpo_train``'s inline data-processing block (overlong filter, one ``token_loss_mask`` per
  message, zero ``generation_logprobs`` where a message has none, the ``train_data`` dict): it is
  no function of its own, so its lines run here as written upstream (1674-1726);
- ``policy.get_logprobs`` and ``policy.get_reference_policy_logprobs`` (Megatron or DTensor
  workers under Ray): ``prev_logprobs`` and ``reference_policy_logprobs`` are the generation
  logprobs, which is what the policy computes for on-policy data with the weights that generated
  it. So ``compute_and_apply_seq_logprob_error_masking`` sees no training/generation mismatch;
- the ``Timer`` and logger: NeMo RL's ``Timer``, no logger.

**Imports.** ``nemo_rl.algorithms.grpo`` imports NeMo RL's dataset package, whose audio datasets
(``eval_datasets/mmau.py``, ``response_datasets/avqa.py``) import ``soundfile`` and
``scipy.signal`` at module level; nothing on this path reads audio. Where they are not installed
they are stubbed for that import only (``STUBBED``: each name they give refuses to run), as the
``slime`` adapter stubs what slime imports and does not use here; where they are, the real ones
are imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters.copied import CopiedFrom
from pytest_rollout_chaos.collector.protocol import Rollout, Row, Turn, row_index

STOOD_IN: Final = (
    "grpo_train's inline data-processing block (overlong filter, token_loss_mask per message, zero "
    "generation_logprobs where a message has none, the train_data dict): no function of its own, its "
    "lines run as written upstream",
    "policy.get_logprobs and policy.get_reference_policy_logprobs (the policy's workers): the "
    "generation logprobs stand in, as on-policy data recomputed with the same weights",
)
"""What of ``grpo_train``'s path from the rollout to ``policy.train`` is stood in; the rest is NeMo RL's."""
GRPO_MODULE: Final = "nemo_rl.algorithms.grpo"
COPIED: Final = CopiedFrom(
    module=GRPO_MODULE,
    function="grpo_train",
    fingerprints=frozenset({"b65f4c2a98815534"}),  # 3eebe4da, 964b609a, 3069f281, c6a661e8 alike
    trees="NVIDIA-NeMo/RL 3eebe4da, 964b609a, 3069f281 and c6a661e8",
)
"""The function whose inline block ``train_batch`` runs as copied, as it is at the pinned trees."""
STUBBED: Final = ("soundfile", "scipy", "scipy.signal")


def load_grpo() -> Any:
    """``nemo_rl.algorithms.grpo``, imported with the audio libraries stubbed where they are not
    installed; the stubs leave ``sys.modules`` once the import is done, so nothing else sees them."""
    stubbed = [name for name in STUBBED if name not in sys.modules and _missing(name)]
    for name in stubbed:
        sys.modules[name] = _Refusing(name)
    try:
        return importlib.import_module(GRPO_MODULE)
    finally:
        for name in stubbed:
            sys.modules.pop(name, None)


def _missing(name: str) -> bool:
    parent = name.partition(".")[0]
    return importlib.util.find_spec(parent) is None


class _Refusing(types.ModuleType):
    """A module NeMo RL imports and this path never uses: each name it gives refuses to run."""

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        name = f"{self.__name__}.{attribute}"

        def refuse(*args: object, **kwargs: object) -> None:
            raise ModuleNotFoundError(
                f"{self.__name__} is not installed: the nemo_rl adapter stubbed it for NeMo RL's "
                f"imports, and {name} was called"
            )

        return refuse


@dataclass(frozen=True, slots=True)
class TrainBatch:
    """What ``policy.train`` would get, and the batch it was made from."""

    train_data: Any  # BatchedDataDict[ClippedPGLossDataDict]
    repeated_batch: Any  # the rollout's final_batch after rewards, baselines and masks
    rewards: Any  # the rewards the advantages were computed from
    complete: bool  # dynamic sampling's is_batch_complete: False, and grpo_train generates again


def train_batch(result: Any, master_config: dict[str, Any], tokenizer: Any) -> TrainBatch:
    """``grpo_train``'s steps from the caller's result to the ``train_data`` of ``policy.train``."""
    import torch

    grpo = load_grpo()
    grpo_config = master_config["grpo"]
    input_ids = result.input_ids
    repeated_batch = result.final_batch
    rollout_metrics = result.rollout_metrics
    if not grpo._should_log_nemo_gym_responses(master_config):
        for key in list(rollout_metrics):
            if "full_result" in key:
                rollout_metrics.pop(key)
    rollout_metrics["mean_gen_tokens_per_sample"]  # grpo_train reads it (1577)

    repeated_batch = grpo.scale_rewards(repeated_batch, grpo_config["reward_scaling"])
    if grpo_config["reward_shaping"]["enabled"]:
        repeated_batch = grpo.apply_reward_shaping(repeated_batch, grpo_config["reward_shaping"])
    rewards = repeated_batch["total_reward"]
    baseline, std = grpo.calculate_baseline_and_std_per_prompt(
        input_ids,
        rewards,
        torch.ones_like(rewards),
        leave_one_out_baseline=grpo_config["use_leave_one_out_baseline"],
    )
    repeated_batch, complete, _, _ = grpo.dynamic_sampling(
        repeated_batch, std, baseline, 1, master_config, grpo.Timer(), None
    )
    rewards = (
        repeated_batch["total_reward"]
        if not grpo_config["use_dynamic_sampling"]
        else repeated_batch["filtered_reward"]
    )
    if not complete:
        return TrainBatch(None, repeated_batch, rewards, complete=False)
    prompt_only = grpo._extract_prompt_only_messages(repeated_batch["message_log"])
    prompt_flat, _ = grpo.batched_message_log_to_flat_message(
        prompt_only, pad_value_dict={"token_ids": tokenizer.pad_token_id}
    )
    prompt_ids_for_adv = prompt_flat["token_ids"]

    # grpo_train's inline data processing (STOOD_IN: run as written upstream).
    if grpo_config["overlong_filtering"]:
        loss_multiplier = repeated_batch["loss_multiplier"].clone()
        truncated = repeated_batch["truncated"]
        if isinstance(truncated, list):
            truncated = torch.tensor(truncated, dtype=torch.bool)
        loss_multiplier[truncated] = 0
        repeated_batch["loss_multiplier"] = loss_multiplier
    for message_log in repeated_batch["message_log"]:
        for message in message_log:
            if message["role"] == "assistant":
                message["token_loss_mask"] = torch.ones_like(message["token_ids"])
            else:
                message["token_loss_mask"] = torch.zeros_like(message["token_ids"])
            if "generation_logprobs" not in message:
                message["generation_logprobs"] = torch.zeros_like(message["token_ids"], dtype=torch.float32)
    flat_messages, input_lengths = grpo.batched_message_log_to_flat_message(
        repeated_batch["message_log"],
        pad_value_dict={"token_ids": tokenizer.pad_token_id},
        make_sequence_length_divisible_by=master_config["policy"]["make_sequence_length_divisible_by"],
    )
    train_data = grpo.BatchedDataDict(
        {
            "input_ids": flat_messages["token_ids"],
            "input_lengths": input_lengths,
            "generation_logprobs": flat_messages["generation_logprobs"],
            "token_mask": flat_messages["token_loss_mask"],
            "sample_mask": repeated_batch["loss_multiplier"],
        }
    )
    train_data.update(flat_messages.get_multimodal_dict(as_tensors=False))
    train_data.to("cpu")

    # The policy's logprobs (STOOD_IN): the generation logprobs.
    train_data["prev_logprobs"] = train_data["generation_logprobs"].clone()
    if not grpo_config.get("skip_reference_policy_logprobs_calculation"):
        train_data["reference_policy_logprobs"] = train_data["generation_logprobs"].clone()
    grpo.compute_and_apply_seq_logprob_error_masking(
        train_data=train_data,
        rewards=rewards,
        seq_logprob_error_threshold=grpo_config["seq_logprob_error_threshold"],
    )
    mask = train_data["token_mask"] * train_data["sample_mask"].unsqueeze(-1)
    estimator = grpo._create_advantage_estimator(master_config)
    train_data["advantages"] = estimator.compute_advantage(
        prompt_ids=prompt_ids_for_adv,
        rewards=rewards,
        mask=mask,
        repeated_batch=repeated_batch,
        logprobs_policy=train_data["prev_logprobs"],
        logprobs_reference=train_data.get("reference_policy_logprobs"),
    )
    return TrainBatch(train_data, repeated_batch, rewards, complete=True)


def rollouts(rows: Sequence[Row], batch: TrainBatch, *, attempts: int) -> list[Rollout | None]:
    """One Rollout per row, read from the ``train_data`` (row order, as ``final_batch`` keeps it).

    The tokens, loss mask and logprobs are the flat tensors ``policy.train`` gets, cut at the
    message boundaries of the batch's message logs: each message whose tokens are all in the
    loss mask is one turn, its prompt every token before it. The reward is the one the advantages
    were computed from; ``truncated`` the batch's. Every row is in the train batch: NeMo RL trains
    on each (a zero ``sample_mask`` zeroes its loss, not its reward in the baseline). A row the
    batch lacks stays ``None``; when dynamic sampling leaves the batch incomplete, no row is
    trained in this step.
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


def _values(data: Any) -> list[Any]:
    """A tensor's or a list's items as plain Python values."""
    tolist = getattr(data, "tolist", None)
    return list(tolist()) if callable(tolist) else list(data)
