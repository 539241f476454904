"""The arguments the ``slime`` adapter hands slime: slime's own parser defaults, what the run
fixes, and what the scenario's ``trainer_config`` asks (``slime.<name>``).

Past generation they are what ``RolloutManager.generate`` reads: GRPO, rewards normalized per
group, std normalization off for one sample per prompt as ``slime_validate_args`` sets it;
``rollout_batch_size`` is the number of groups.
"""

from __future__ import annotations

from typing import Any, Final

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings
from pytest_rollout_chaos.collector.protocol import CollectorContext

GENERATE_PATH: Final = f"{__package__}.slime.generate_with_gym"
ARGUMENTS: Final = "slime/utils/arguments.py"
_TRAIN_DATA_DEFAULTS: Final[tuple[tuple[str, Any], ...]] = (
    ("advantage_estimator", "grpo"),
    ("rewards_normalization", True),
    ("reward_key", None),
    ("log_reward_category", None),
    ("rollout_num_gpus", None),
    ("use_fault_tolerance", False),
    ("load_debug_rollout_data", None),
    ("load_debug_rollout_data_subsample", None),
    ("save_debug_rollout_data", None),
    ("debug_rollout_only", False),
    ("custom_rollout_log_function_path", None),
    ("custom_reward_post_process_path", None),
    ("custom_convert_samples_to_train_data_path", None),
    ("use_wandb", False),
    ("use_tensorboard", False),
    ("wandb_always_use_train_step", False),
)
"""What ``RolloutManager.generate`` reads past generation, each slime's parser default."""


KNOWN: Final = (
    "hf_checkpoint",
    "custom_generate_function_path",
    "n_samples_per_prompt",
    "rollout_num_engines",
    "sglang_server_concurrency",
    "sglang_dp_size",
    "rollout_temperature",
    "rollout_top_p",
    "rollout_top_k",
    "rollout_max_response_len",
    "rollout_stop",
    "rollout_stop_token_ids",
    "rollout_skip_special_tokens",
    "rollout_seed",
    "sglang_enable_deterministic_inference",
    "group_rm",
    "partial_rollout",
    "mask_offpolicy_in_partial_rollout",
    "use_rollout_routing_replay",
    "ci_test",
    "custom_rm_path",
    *(name for name, _ in _TRAIN_DATA_DEFAULTS),
    "rollout_batch_size",
    "grpo_std_normalization",
)
"""Every slime argument this path reads: what ``trainer_config`` may set (``slime.<name>``)."""


def settings(ctx: CollectorContext, *, n_samples_per_prompt: int, groups: int = 1) -> TrainerSettings:
    """The slime arguments, each slime's own parser default (``slime/utils/arguments.py`` and
    ``slime/backends/sglang_utils/arguments.py`` at both pinned trees) unless the run fixes it or
    the scenario's ``trainer_config`` asks otherwise; past generation, what
    ``RolloutManager.generate`` reads to the train data (``groups`` prompts in the batch)."""
    taken = TrainerSettings("slime", ctx.settings.trainer_config, KNOWN)
    taken.check()
    taken.run(
        "hf_checkpoint", str(bundled.tiny_model_dir()), "a checkpoint slime may load; nothing reads it here"
    )
    taken.run(
        "custom_generate_function_path",
        GENERATE_PATH,
        "generation goes through the Gym agents, by slime's own custom-generate hook",
    )
    taken.run("n_samples_per_prompt", n_samples_per_prompt, "the workload's generations per prompt")
    taken.run("rollout_num_engines", 1, "one policy server (slime counts its SGLang engines)")
    taken.run("sglang_dp_size", None, "one policy server, no data parallelism (SGLang's own argument)")
    taken.default(
        "sglang_enable_deterministic_inference",
        False,
        "slime/rollout/sglang_rollout.py:108, GenerateState: "
        "getattr(args, 'sglang_enable_deterministic_inference', False)",
    )
    where = f"{ARGUMENTS}, add_slime_arguments"
    for name, default in _SLIME_DEFAULTS:
        taken.default(name, default, where)
    taken.default(
        "sglang_server_concurrency", 512, "slime/backends/sglang_utils/arguments.py:39, add_sglang_arguments"
    )
    taken.run("rollout_batch_size", groups, "the workload's prompts: one rollout step collects them all")
    if n_samples_per_prompt == 1:
        taken.run(
            "grpo_std_normalization",
            False,
            f"{ARGUMENTS}, slime_validate_args: off when n_samples_per_prompt is 1",
        )
    else:
        taken.default("grpo_std_normalization", True, where)
    for name, default in _TRAIN_DATA_DEFAULTS:
        taken.default(name, default, where)
    return taken


_SLIME_DEFAULTS: Final[tuple[tuple[str, Any], ...]] = (
    ("rollout_temperature", 1.0),
    ("rollout_top_p", 1.0),
    ("rollout_top_k", -1),
    ("rollout_max_response_len", None),
    ("rollout_stop", None),
    ("rollout_stop_token_ids", None),
    ("rollout_skip_special_tokens", False),
    ("rollout_seed", 42),
    ("group_rm", False),
    ("partial_rollout", False),
    ("mask_offpolicy_in_partial_rollout", False),
    ("use_rollout_routing_replay", False),
    ("ci_test", False),
    ("custom_rm_path", None),
    ("calculate_per_token_loss", False),
)
"""slime's parser defaults of the arguments this path reads (the hook ignores the sampling ones:
the agent samples; they still reach ``GenerateState``'s sampling params as slime builds them), and
``calculate_per_token_loss``, how slime's loss weighs each sample (the Rollouts' ``loss_reduction``)."""
