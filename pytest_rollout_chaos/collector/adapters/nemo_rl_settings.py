"""Every setting the ``nemo_rl`` adapter gives NeMo RL, keyed as NeMo RL's master config nests it.

Train mode gives the ``NemoGym`` actor its ``NemoGymConfig`` (``env.nemo_gym``) and what its
skipped spin-up would have set (the NaN-retry count), and the caller its generation config
(``policy.generation``). Validation mode gives ``grpo.validate()`` a master config. Each value is
upstream's own default (``where`` names the line at the pinned trees: NVIDIA-NeMo/RL 3eebe4da,
964b609a, 3069f281, c6a661e8), a value the run fixes where NeMo RL has no default (a required
key of its ``TypedDict`` configs), or what the scenario's ``trainer_config`` asks
(``nemo_rl.<key>``).

Validation runs the path ``validate()`` takes by default: ``vllm_cfg.async_engine`` unset is
``False`` (``grpo._should_use_async_rollouts``), so it calls ``run_multi_turn_rollout``. The
async-engine path (``run_async_multi_turn_rollout``, or ``run_multi_turn_rollout_async_generation``
after PR #2209) is the variant a scenario chooses with
``nemo_rl.policy.generation.vllm_cfg.async_engine: true``.
"""

from __future__ import annotations

from typing import Any, Final

from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings, nested
from pytest_rollout_chaos.collector.protocol import CollectorContext

TRAINER: Final = "nemo_rl"
NAN_RETRIES: Final = "env.nemo_gym.initial_global_config_dict.rollout_max_attempts_to_avoid_lp_nan"
ASYNC_ENGINE: Final = "policy.generation.vllm_cfg.async_engine"

# Where NeMo RL's own defaults are (line numbers of all four pinned trees unless said otherwise).
WHERE_NAN_RETRIES: Final = (
    "nemo_rl/environments/nemo_gym.py:85-86, NemoGym.__init__: "
    'initial_global_config_dict.pop("rollout_max_attempts_to_avoid_lp_nan", 1)'
)
WHERE_ASYNC_ENGINE: Final = (
    "nemo_rl/algorithms/grpo.py:992 (993 at c6a661e8), _should_use_async_rollouts: "
    'vllm_cfg.get("async_engine", False); validate() then calls run_multi_turn_rollout'
)
WHERE_GYM_STOPS: Final = (
    "nemo_rl/environments/nemo_gym.py:280-281 (298-299 at 964b609a), setup_nemo_gym_config sets it None; "
    "run_async_nemo_gym_rollout asserts it is unset"
)
WHERE_GYM_TOP_K: Final = (
    "nemo_rl/experience/rollouts.py, run_async_nemo_gym_rollout: assert not generation_config['top_k']"
)

WHERE_GRPO_CONFIG: Final = "examples/configs/grpo_math_1B.yaml"
"""NeMo RL's base GRPO config, which its other configs (the NeMo Gym ones included) start from."""
GRPO_STEP: Final[tuple[tuple[str, Any, str], ...]] = (
    ("grpo.normalize_rewards", True, "8"),
    ("grpo.use_leave_one_out_baseline", True, "9"),
    ("grpo.overlong_filtering", False, "13"),
    ("grpo.use_dynamic_sampling", False, "17"),
    ("grpo.reward_shaping.enabled", False, "21"),
    ("grpo.reward_scaling.enabled", False, "35"),
    ("grpo.seq_logprob_error_threshold", None, "40"),
    ("policy.make_sequence_length_divisible_by", 1, "248 (policy.dtensor_cfg.tensor_parallel_size, 105)"),
)
"""What ``grpo_train`` reads between the rollout and ``policy.train`` that its ``GRPOConfig`` and
``PolicyConfig`` require, with the value (and line) of ``grpo_math_1B.yaml`` at both train trees."""

KNOWN: Final = (
    "env.nemo_gym.model_name",
    "env.nemo_gym.base_urls",
    NAN_RETRIES,
    "policy.generation.backend",
    "policy.generation.temperature",
    "policy.generation.top_p",
    "policy.generation.top_k",
    "policy.generation.max_new_tokens",
    "policy.generation.stop_strings",
    "policy.generation.stop_token_ids",
    "policy.generation.vllm_cfg.max_model_len",
    ASYNC_ENGINE,
    "policy.generation._pad_token_id",
    "policy.max_total_sequence_length",
    "grpo.val_batch_size",
    "grpo.max_val_samples",
    "grpo.max_rollout_turns",
    "logger.num_val_samples_to_print",
    *(key for key, _, _ in GRPO_STEP),
)
"""Every key the adapter hands NeMo RL, in either mode: what ``trainer_config`` may set."""


def settings(ctx: CollectorContext) -> TrainerSettings:
    """An empty record for one collection, the scenario's ``nemo_rl.*`` keys checked."""
    taken = TrainerSettings(TRAINER, ctx.settings.trainer_config, KNOWN)
    taken.check()
    return taken


def train(ctx: CollectorContext, max_model_len: int) -> TrainerSettings:
    """Train mode's settings: the actor's ``NemoGymConfig`` and NaN retries, the caller's generation
    config."""
    taken = settings(ctx)
    run = ctx.settings
    taken.run("env.nemo_gym.model_name", ctx.model, "the model the policy serves")
    taken.run("env.nemo_gym.base_urls", [ctx.policy], "the policy server of this stack")
    taken.default(NAN_RETRIES, 1, WHERE_NAN_RETRIES)
    taken.run(
        "policy.generation.backend", "vllm", "GenerationConfig requires it; the policy speaks vLLM's API"
    )
    taken.run(
        "policy.generation.temperature", run.temperature, "GenerationConfig requires it (the harness's)"
    )
    taken.run("policy.generation.top_p", 1.0, "GenerationConfig requires it: plain sampling")
    taken.default("policy.generation.top_k", None, WHERE_GYM_TOP_K)
    taken.run(
        "policy.generation.max_new_tokens", run.max_new_tokens, "GenerationConfig requires it (the harness's)"
    )
    taken.default("policy.generation.stop_strings", None, WHERE_GYM_STOPS)
    taken.default("policy.generation.stop_token_ids", None, WHERE_GYM_STOPS)
    taken.run("policy.generation.vllm_cfg.max_model_len", max_model_len, "the policy model's context length")
    return taken


def train_step(taken: TrainerSettings, *, prompts: int, generations: int) -> dict[str, Any]:
    """What ``grpo_train`` reads from the rollout to ``policy.train`` (``nemo_rl_train_batch``):
    taken into ``taken``; the master config those steps get."""
    for key, value, line in GRPO_STEP:
        taken.run(key, value, f"GRPOConfig/PolicyConfig require it; {WHERE_GRPO_CONFIG}:{line}")
    taken.run("grpo.num_prompts_per_step", prompts, "the workload's prompts: one step collects them all")
    taken.run(
        "grpo.num_generations_per_prompt",
        generations,
        "the workload's generations_per_prompt (GRPO group size)",
    )
    config = nested(taken.items, "")
    # _create_advantage_estimator hands loss_fn to the estimator; GRPO's reads nothing of it.
    config["loss_fn"] = {}
    return config


def nan_retries(taken: TrainerSettings) -> int:
    """``rollout_max_attempts_to_avoid_lp_nan`` as the actor's spin-up would have set it."""
    value = next(item.value for item in taken.items if item.key == NAN_RETRIES)
    return int(value)


def actor_cfg(taken: TrainerSettings) -> dict[str, Any]:
    """``NemoGymConfig`` from the taken settings (without the NaN-retry count, which spin-up pops)."""
    cfg = nested(taken.items, "env.nemo_gym")
    cfg["initial_global_config_dict"] = {}
    return cfg


def validation(
    ctx: CollectorContext, *, rows: int, max_model_len: int, pad_token_id: int
) -> tuple[TrainerSettings, dict[str, Any]]:
    """Validation's settings and the master config ``validate()`` gets from them."""
    taken = settings(ctx)
    run = ctx.settings
    taken.run("grpo.val_batch_size", rows, "one batch of the rows asked for")
    taken.run("grpo.max_val_samples", rows, "the rows asked for")
    taken.run("grpo.max_rollout_turns", run.max_turns, "GRPOConfig requires it (the harness's)")
    taken.run("policy.max_total_sequence_length", max_model_len, "the policy model's context length")
    taken.run(
        "policy.generation.backend", "vllm", "GenerationConfig requires it; the policy speaks vLLM's API"
    )
    taken.run(
        "policy.generation.max_new_tokens", run.max_new_tokens, "GenerationConfig requires it (the harness's)"
    )
    taken.run(
        "policy.generation.temperature", run.temperature, "GenerationConfig requires it (the harness's)"
    )
    taken.run("policy.generation.top_p", 1.0, "GenerationConfig requires it: plain sampling")
    taken.run("policy.generation.top_k", None, "GenerationConfig requires it: no top-k")
    taken.run("policy.generation.stop_token_ids", None, "GenerationConfig requires it: none")
    taken.run("policy.generation.stop_strings", None, "GenerationConfig requires it: none")
    taken.default(ASYNC_ENGINE, False, WHERE_ASYNC_ENGINE)
    taken.run("policy.generation.vllm_cfg.max_model_len", max_model_len, "the policy model's context length")
    taken.run(
        "policy.generation._pad_token_id",
        pad_token_id,
        "the tokenizer's pad token, as configure_generation_config writes it "
        "(nemo_rl/models/generation/__init__.py:39)",
    )
    taken.run("logger.num_val_samples_to_print", 0, "LoggerConfig requires it: print no samples")
    return taken, nested(taken.items, "")


def variant(master_config: dict[str, Any]) -> str:
    """Which of ``validate()``'s paths the master config takes: ``async_engine`` or ``sync`` (the default)."""
    return "async_engine" if master_config["policy"]["generation"]["vllm_cfg"].get("async_engine") else "sync"
