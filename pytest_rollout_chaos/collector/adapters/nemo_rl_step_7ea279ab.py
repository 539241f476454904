"""``grpo_train``'s step from the rollout to ``policy.train``, as NeMo RL main (7ea279ab) writes it.

After #3000 the master config is NeMo RL's pydantic ``MasterConfig``, read by attribute
(``master_config.grpo.use_dynamic_sampling``), and the step has more of its own functions. Lines of
``nemo_rl/algorithms/grpo.py`` at 7ea279ab: the caller ``run_nemo_gym_rollout_sync`` and what it is
passed (2944-2972); ``rollout_metrics["mean_gen_tokens_per_sample"]`` (3019); ``scale_rewards``
(3024) and ``apply_reward_shaping`` when enabled (3029); the unshaped rewards dynamic sampling's
std is taken on (3046); ``calculate_baseline_and_std_per_prompt`` on the CPU (3070; the GPU branch
is ``grpo.calculate_advantages_on_gpu``, off by default, which the adapter never sets);
``dynamic_sampling`` (3080); ``backfill_missing_routed_experts`` (3116);
``extract_initial_prompt_messages`` and the prompt ids (3120-3128); the overlong filter
(3136-3145); ``_apply_mask_sample_filter`` (3147); ``add_grpo_token_loss_masks_and_generation_logprobs``
(3150); the flat messages and the ``train_data`` dict with its multimodal fields and routed experts
(3155-3198); ``_resolve_logprob_skip_flags`` (3204) and the policy's logprobs (3239-3265);
``compute_and_apply_seq_logprob_error_masking`` (3275); ``adv_estimator.compute_advantage`` (3294);
``_apply_configured_message_level_advantage_penalties`` (3315); ``_clip_grpo_advantages`` (3321).
Every named function is NeMo RL's own, called with what ``grpo_train`` passes it.

The master config is built as NeMo RL's own unit tests build one (``nemo_rl_grpo.typed_config``:
``MasterConfig.model_construct``, as in ``tests/unit/algorithms/test_grpo.py``).

What is stood in (``STOOD_IN``, recorded with each call):

- ``grpo_train``'s inline lines: the overlong filter and the ``train_data`` dict (3136-3198),
  and the arguments it computes for the caller and the step's functions: no function of their own,
  so they run here as written upstream;
- ``policy`` (its workers): ``nemo_rl_policy.PolicyLogprobs``, the policy's own weights scoring
  each sequence, is asked for the logprobs ``_resolve_logprob_skip_flags`` does not skip, with
  the ``logprob_data`` ``grpo_train`` builds (3216-3265), as for the trees before #3000
  (``nemo_rl_step_3eebe4da``); so ``compute_and_apply_seq_logprob_error_masking`` masks what
  disagrees with the policy beyond ``grpo.seq_logprob_error_threshold``, when it is set;
- the ``Timer``, logger and metrics: NeMo RL's ``Timer``, no logger, the metrics dropped.
"""

from __future__ import annotations

from typing import Any, Final

from pytest_rollout_chaos.collector.adapters import nemo_rl_policy, nemo_rl_settings
from pytest_rollout_chaos.collector.adapters.copied import CopiedFrom
from pytest_rollout_chaos.collector.adapters.nemo_rl_grpo import GRPO_MODULE, TrainBatch, typed_config

STOOD_IN: Final = (
    "grpo_train's inline lines (overlong filter, the train_data dict, the arguments it computes for "
    "the caller and the step's functions): no function of their own, they run as written upstream",
    *nemo_rl_policy.STOOD_IN,
)
"""What of ``grpo_train``'s path from the rollout to ``policy.train`` is stood in; the rest is NeMo RL's."""
COPIED: Final = CopiedFrom(
    module=GRPO_MODULE,
    function="grpo_train",
    fingerprints=frozenset({"2c6d752875bd3532"}),
    trees="NVIDIA-NeMo/RL 7ea279ab",
)
"""The function whose lines ``train_batch`` runs as copied, as it is at main."""
SETTINGS: Final = nemo_rl_settings.GRPO_STEP_7EA279AB
WHERE: Final = nemo_rl_settings.WHERE_GRPO_CONFIG_7EA279AB
"""What this step reads of ``grpo_math_1B.yaml`` at 7ea279ab."""


def master_config(config: dict[str, Any], grpo: Any) -> Any:
    """The ``MasterConfig`` ``grpo_train`` gets, from the plain dict of the settings."""
    return typed_config(grpo, config)


def caller_kwargs(grpo: Any, master_config: Any) -> dict[str, Any]:
    """What ``grpo_train`` passes ``run_nemo_gym_rollout_sync`` beyond the batch, the tokenizer, the
    environment and the generation config (2944-2972; the logger's tables are off, as without W&B)."""
    return {
        "max_seq_len": master_config.policy["max_total_sequence_length"],
        "max_rollout_turns": None,
        "greedy": False,
        "effort_config": grpo._get_effort_config(master_config),
        "reward_penalty_config": master_config.reward_penalties,
        "thinking_tags": grpo.get_nemo_gym_thinking_tags(master_config.env),
        "mask_env_flagged_samples": grpo.should_mask_flagged_samples(master_config.env),
        "deduplicate_multimodal_data": master_config.grpo.deduplicate_multimodal_data,
        "debug_payload_metrics": master_config.grpo.debug_payload_metrics,
    }


def train_batch(grpo: Any, result: Any, master_config: Any, tokenizer: Any, policy: Any) -> TrainBatch:
    """``grpo_train``'s steps from the caller's result to the ``train_data`` of ``policy.train``."""
    import torch

    input_ids = result.input_ids
    repeated_batch = result.final_batch
    rollout_metrics = result.rollout_metrics
    rollout_metrics["mean_gen_tokens_per_sample"]  # grpo_train reads it (3019)

    repeated_batch = grpo.scale_rewards(repeated_batch, master_config.grpo.reward_scaling)
    if master_config.grpo.reward_shaping.enabled:
        repeated_batch = grpo.apply_reward_shaping(repeated_batch, master_config.grpo.reward_shaping)
    rewards = repeated_batch["total_reward"]
    std_rewards = (
        repeated_batch["unshaped_total_reward"]
        if master_config.grpo.use_dynamic_sampling and "unshaped_total_reward" in repeated_batch
        else None
    )
    baseline, std = grpo.calculate_baseline_and_std_per_prompt(
        input_ids,
        rewards,
        torch.ones_like(rewards),
        leave_one_out_baseline=master_config.grpo.use_leave_one_out_baseline,
        std_rewards=std_rewards,
    )
    repeated_batch, complete, _, _ = grpo.dynamic_sampling(
        repeated_batch, std, baseline, 1, master_config, grpo.Timer(), None
    )
    rewards = (
        repeated_batch["total_reward"]
        if not master_config.grpo.use_dynamic_sampling
        else repeated_batch["filtered_reward"]
    )
    if not complete:
        return TrainBatch(None, repeated_batch, rewards, complete=False)
    grpo.backfill_missing_routed_experts(repeated_batch["message_log"])
    initial_prompt_message_logs = grpo.extract_initial_prompt_messages(
        repeated_batch["message_log"], repeated_batch["length"]
    )
    prompt_batched_flat, _ = grpo.batched_message_log_to_flat_message(
        initial_prompt_message_logs, pad_value_dict={"token_ids": tokenizer.pad_token_id}
    )
    prompt_ids_for_adv = prompt_batched_flat["token_ids"]

    # grpo_train's inline data processing (STOOD_IN: run as written upstream).
    if master_config.grpo.overlong_filtering:
        loss_multiplier = repeated_batch["loss_multiplier"].clone()
        truncated = repeated_batch["truncated"]
        if isinstance(truncated, list):
            truncated = torch.tensor(truncated, dtype=torch.bool)
        loss_multiplier[truncated] = 0
        repeated_batch["loss_multiplier"] = loss_multiplier
    grpo._apply_mask_sample_filter(repeated_batch)
    grpo.add_grpo_token_loss_masks_and_generation_logprobs(repeated_batch["message_log"])
    flat_messages, input_lengths = grpo.batched_message_log_to_flat_message(
        repeated_batch["message_log"],
        pad_value_dict={"token_ids": tokenizer.pad_token_id},
        make_sequence_length_divisible_by=master_config.policy["make_sequence_length_divisible_by"],
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
    extra_multimodal_data = flat_messages.get_multimodal_dict(
        as_tensors=False, pixel_dtype=grpo._policy_dtype(master_config.policy)
    )
    train_data.update(extra_multimodal_data)
    grpo._preserve_router_replay_routed_experts(train_data, flat_messages, master_config.policy)
    train_data.to("cpu")

    # The policy's logprobs (3202-3265; STOOD_IN: ``policy`` is nemo_rl_policy's).
    skip_prev_logprobs = _policy_logprobs(
        grpo,
        train_data,
        flat_messages,
        repeated_batch=repeated_batch,
        extra_multimodal_data=extra_multimodal_data,
        master_config=master_config,
        policy=policy,
    )
    if not skip_prev_logprobs:
        grpo.compute_and_apply_seq_logprob_error_masking(
            train_data=train_data,
            rewards=rewards,
            seq_logprob_error_threshold=master_config.grpo.seq_logprob_error_threshold,
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
    grpo._apply_configured_message_level_advantage_penalties(
        train_data, repeated_batch["message_log"], master_config
    )
    train_data["advantages"] = grpo._clip_grpo_advantages(train_data["advantages"], master_config.grpo)
    return TrainBatch(train_data, repeated_batch, rewards, complete=True)


def _policy_logprobs(
    grpo: Any,
    train_data: Any,
    flat_messages: Any,
    *,
    repeated_batch: Any,
    extra_multimodal_data: Any,
    master_config: Any,
    policy: Any,
) -> bool:
    """``grpo_train``'s ``prev_logprobs`` and ``reference_policy_logprobs`` (3202-3265), from
    ``policy`` where it would ask its workers; whether ``prev_logprobs`` were skipped."""
    import torch

    skip_prev_logprobs, skip_reference_logprobs = grpo._resolve_logprob_skip_flags(master_config)
    logprob_data = grpo.BatchedDataDict(
        {
            "input_ids": train_data["input_ids"],
            "input_lengths": train_data["input_lengths"],
            "token_mask": flat_messages["token_loss_mask"],
            "sample_mask": repeated_batch["loss_multiplier"],
            **extra_multimodal_data,
        }
    )
    grpo._preserve_router_replay_routed_experts(logprob_data, flat_messages, master_config.policy)
    if not skip_prev_logprobs:
        train_data["prev_logprobs"] = policy.get_logprobs(logprob_data)["logprobs"]
    else:
        train_data["prev_logprobs"] = torch.zeros_like(train_data["generation_logprobs"])
    if not skip_reference_logprobs:
        train_data["reference_policy_logprobs"] = policy.get_reference_policy_logprobs(logprob_data)[
            "reference_logprobs"
        ]
    else:
        train_data["reference_policy_logprobs"] = torch.zeros_like(train_data["prev_logprobs"])
    return bool(skip_prev_logprobs)
