"""``grpo_train``'s step from the rollout to ``policy.train``, as NeMo RL wrote it before #3000.

``grpo_train`` (``nemo_rl/algorithms/grpo.py``, lines 1515-1812 at the pinned trees 3eebe4da,
964b609a and 3069f281, one line later at c6a661e8) takes the caller's ``AsyncNemoGymRolloutResult``
and, before the optimizer step, runs: ``rollout_metrics["mean_gen_tokens_per_sample"]`` (1577),
``scale_rewards`` (1581), ``apply_reward_shaping`` when enabled,
``calculate_baseline_and_std_per_prompt`` (1613), ``dynamic_sampling`` (1624),
``_extract_prompt_only_messages`` and ``batched_message_log_to_flat_message`` for the prompt ids
(1659-1663), the overlong filter and the loss masks (1674-1697),
``batched_message_log_to_flat_message`` again to the ``train_data`` ``BatchedDataDict``
(1700-1726), the policy's logprobs (1747), ``compute_and_apply_seq_logprob_error_masking`` (1768)
and ``adv_estimator.compute_advantage`` (1784). Every named function above is NeMo RL's own,
called with what ``grpo_train`` passes it; what one raises is what ``train_batch`` raises. The
master config is a plain dict, as NeMo RL's ``TypedDict`` configs were then.

What is stood in (``STOOD_IN``, recorded with each call):

- ``grpo_train``'s inline data-processing block (overlong filter, one ``token_loss_mask`` per
  message, zero ``generation_logprobs`` where a message has none, the ``train_data`` dict): it is
  no function of its own, so its lines run here as written upstream (1674-1726);
- ``policy`` (Megatron or DTensor workers under Ray): ``nemo_rl_policy.PolicyLogprobs``, the
  policy's own weights scoring each sequence, is asked for ``prev_logprobs`` and
  ``reference_policy_logprobs`` with the ``logprob_data`` ``grpo_train`` builds (1737-1760), so
  ``compute_and_apply_seq_logprob_error_masking`` compares the generation logprobs with the
  policy's and, with ``grpo.seq_logprob_error_threshold`` set, masks a sequence that disagrees
  (its ``sample_mask`` set to 0) as NeMo RL does;
- the ``Timer`` and logger: NeMo RL's ``Timer``, no logger.
"""

from __future__ import annotations

from typing import Any, Final

from pytest_rollout_chaos.collector.adapters import nemo_rl_policy, nemo_rl_settings
from pytest_rollout_chaos.collector.adapters.copied import CopiedFrom
from pytest_rollout_chaos.collector.adapters.nemo_rl_grpo import GRPO_MODULE, TrainBatch

STOOD_IN: Final = (
    "grpo_train's inline data-processing block (overlong filter, token_loss_mask per message, zero "
    "generation_logprobs where a message has none, the train_data dict): no function of its own, its "
    "lines run as written upstream",
    *nemo_rl_policy.STOOD_IN,
)
"""What of ``grpo_train``'s path from the rollout to ``policy.train`` is stood in; the rest is NeMo RL's."""
COPIED: Final = CopiedFrom(
    module=GRPO_MODULE,
    function="grpo_train",
    fingerprints=frozenset({"b65f4c2a98815534"}),  # 3eebe4da, 964b609a, 3069f281, c6a661e8 alike
    trees="NVIDIA-NeMo/RL 3eebe4da, 964b609a, 3069f281 and c6a661e8",
)
"""The function whose lines ``train_batch`` runs as copied, as it is at those trees."""
SETTINGS: Final = nemo_rl_settings.GRPO_STEP
WHERE: Final = nemo_rl_settings.WHERE_GRPO_CONFIG
"""What this step reads of ``grpo_math_1B.yaml`` at those trees."""


def master_config(config: dict[str, Any], grpo: Any) -> dict[str, Any]:
    """The master config as ``grpo_train`` gets it at these trees: the plain dict."""
    return config


def caller_kwargs(grpo: Any, master_config: dict[str, Any]) -> dict[str, Any]:
    """What ``grpo_train`` passes the caller beyond the batch, the tokenizer and the configs: the
    defaults (``max_seq_len=None``, ``max_rollout_turns=None``, ``greedy=False``)."""
    return {}


def train_batch(
    grpo: Any, result: Any, master_config: dict[str, Any], tokenizer: Any, policy: Any
) -> TrainBatch:
    """``grpo_train``'s steps from the caller's result to the ``train_data`` of ``policy.train``."""
    import torch

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
    extra_multimodal_data = flat_messages.get_multimodal_dict(as_tensors=False)
    train_data.update(extra_multimodal_data)
    train_data.to("cpu")

    # The policy's logprobs (1737-1760; STOOD_IN: ``policy`` is nemo_rl_policy's).
    logprob_data = grpo.BatchedDataDict(
        {
            "input_ids": train_data["input_ids"],
            "input_lengths": train_data["input_lengths"],
            "token_mask": flat_messages["token_loss_mask"],
            "sample_mask": repeated_batch["loss_multiplier"],
            **extra_multimodal_data,
        }
    )
    train_data["prev_logprobs"] = policy.get_logprobs(logprob_data)["logprobs"]
    if not grpo_config.get("skip_reference_policy_logprobs_calculation"):
        train_data["reference_policy_logprobs"] = policy.get_reference_policy_logprobs(logprob_data)[
            "reference_logprobs"
        ]
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
