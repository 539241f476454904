"""Every setting the ``nemo_rl`` adapter gives NeMo RL, keyed as NeMo RL's master config nests it.

Train mode gives the ``NemoGym`` actor its ``NemoGymConfig`` (``env.nemo_gym``) and what its
skipped spin-up would have set (the NaN-retry count), and the caller its generation config
(``policy.generation``). Validation mode gives ``grpo.validate()`` a master config. Each value is
upstream's own default (``where`` names the line at the pinned trees: NVIDIA-NeMo/RL 3eebe4da,
964b609a, 3069f281, c6a661e8; ``GRPO_STEP_7EA279AB`` names main's, 7ea279ab), a value the run
fixes where NeMo RL has no default (a required key of its configs), or what the scenario's
``trainer_config`` asks (``nemo_rl.<key>``). The NaN-retry knob is taken only on a tree whose
``NemoGym`` has it (#3000 removed it: a NaN logprob then fails the batch at once).

Validation runs the path ``validate()`` takes by default: ``vllm_cfg.async_engine`` unset is
``False`` (``grpo._should_use_async_rollouts``), so it calls ``run_multi_turn_rollout``. The
async-engine path (``run_async_multi_turn_rollout``, or ``run_multi_turn_rollout_async_generation``
after PR #2209) is the variant a scenario chooses with
``nemo_rl.policy.generation.vllm_cfg.async_engine: true``.
"""

from __future__ import annotations

from dataclasses import dataclass
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
STACK_MAX_TOKENS: Final = 64
"""The stack's limit on one generation of a row that names none (the Gym model server's default)."""
WHY_MAX_NEW_TOKENS: Final = (
    "the stack's limit on one generation (a row's own max_output_tokens is lower when the workload "
    "sets one): NeMo RL's configs give ${policy.max_total_sequence_length} "
    "(examples/configs/grpo_math_1B.yaml:277, 370 at 7ea279ab), which NeMo RL's own vLLM server "
    "clamps to the room left in the context and the stack's policy refuses, as stock vLLM does; "
    "NeMo RL main stamps it on every row (_prepare_nemo_gym_rows), older trees ignore it"
)
WHERE_GYM_TOP_K: Final = (
    "nemo_rl/experience/rollouts.py, run_async_nemo_gym_rollout: assert not generation_config['top_k']"
)

WHERE_GRPO_CONFIG: Final = "examples/configs/grpo_math_1B.yaml"
"""NeMo RL's base GRPO config. NeMo Gym's own configs (``examples/nemo_gym/``) do not start from it:
``grpo_nanov3.yaml`` sets ``grpo.seq_logprob_error_threshold: 2`` (line 30; 38 at 7ea279ab) where
this file has null, which a scenario gives as ``nemo_rl.grpo.seq_logprob_error_threshold: 2``."""
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


@dataclass(frozen=True, slots=True)
class Same:
    """A value the config file interpolates from another key (``${grpo.normalize_rewards}``)."""

    key: str


WHERE_GRPO_CONFIG_7EA279AB: Final = "examples/configs/grpo_math_1B.yaml at 7ea279ab"
GRPO_STEP_7EA279AB: Final[tuple[tuple[str, Any, str], ...]] = (
    ("grpo.normalize_rewards", True, "8"),
    ("grpo.use_leave_one_out_baseline", True, "9"),
    ("grpo.overlong_filtering", False, "14"),
    ("grpo.advantage_clip_low", None, "15"),
    ("grpo.advantage_clip_high", None, "16"),
    ("grpo.use_dynamic_sampling", False, "27"),
    ("grpo.reward_shaping.enabled", False, "31"),
    ("grpo.adv_estimator.name", "grpo", "40"),
    ("grpo.adv_estimator.normalize_rewards", Same("grpo.normalize_rewards"), "41"),
    ("grpo.adv_estimator.use_leave_one_out_baseline", Same("grpo.use_leave_one_out_baseline"), "42"),
    ("grpo.reward_scaling.enabled", False, "45"),
    ("grpo.seq_logprob_error_threshold", None, "50"),
    ("grpo.invalid_tool_call_advantage", None, "52"),
    ("grpo.malformed_thinking_advantage", None, "54"),
    ("loss_fn.force_on_policy_ratio", False, "103"),
    ("policy.precision", "bfloat16", "137"),
    ("policy.make_sequence_length_divisible_by", 1, "341 (policy.dtensor_cfg.tensor_parallel_size, 147)"),
)
"""The same for NeMo RL main (7ea279ab): its step reads more (advantage clipping and penalties, the
estimator's own section, the loss config, the policy's precision), the rest is ``GRPOConfig``'s
own defaults. The lines are of ``grpo_math_1B.yaml`` at 7ea279ab."""

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
    *dict.fromkeys(key for key, _, _ in (*GRPO_STEP, *GRPO_STEP_7EA279AB)),
)
"""Every key the adapter hands NeMo RL, in either mode: what ``trainer_config`` may set."""


def settings(ctx: CollectorContext) -> TrainerSettings:
    """An empty record for one collection, the scenario's ``nemo_rl.*`` keys checked."""
    taken = TrainerSettings(TRAINER, ctx.settings.trainer_config, KNOWN)
    taken.check()
    return taken


def train(ctx: CollectorContext, max_model_len: int, *, nan_retry_knob: bool = True) -> TrainerSettings:
    """Train mode's settings: the actor's ``NemoGymConfig`` and NaN retries (on a tree whose actor
    has the knob), the caller's generation config."""
    taken = settings(ctx)
    run = ctx.settings
    taken.run("env.nemo_gym.model_name", ctx.model, "the model the policy serves")
    taken.run("env.nemo_gym.base_urls", [ctx.policy], "the policy server of this stack")
    if nan_retry_knob:
        taken.default(NAN_RETRIES, 1, WHERE_NAN_RETRIES)
    taken.run(
        "policy.generation.backend", "vllm", "GenerationConfig requires it; the policy speaks vLLM's API"
    )
    taken.run(
        "policy.generation.temperature", run.temperature, "GenerationConfig requires it (the harness's)"
    )
    taken.run("policy.generation.top_p", 1.0, "GenerationConfig requires it: plain sampling")
    taken.default("policy.generation.top_k", None, WHERE_GYM_TOP_K)
    taken.run("policy.generation.max_new_tokens", STACK_MAX_TOKENS, WHY_MAX_NEW_TOKENS)
    taken.default("policy.generation.stop_strings", None, WHERE_GYM_STOPS)
    taken.default("policy.generation.stop_token_ids", None, WHERE_GYM_STOPS)
    taken.run("policy.generation.vllm_cfg.max_model_len", max_model_len, "the policy model's context length")
    taken.run("policy.max_total_sequence_length", max_model_len, "the policy model's context length")
    return taken


def train_step(
    taken: TrainerSettings,
    *,
    prompts: int,
    generations: int,
    rows: tuple[tuple[str, Any, str], ...] = GRPO_STEP,
    where: str = WHERE_GRPO_CONFIG,
) -> dict[str, Any]:
    """What ``grpo_train`` reads from the rollout to ``policy.train`` (``rows``, of the config file
    ``where``): taken into ``taken``; the master config those steps get, as a plain dict."""
    values: dict[str, Any] = {}
    for key, value, line in rows:
        if isinstance(value, Same):
            values[key] = taken.run(key, values[value.key], f"{where}:{line}: ${{{value.key}}}")
        else:
            values[key] = taken.run(key, value, f"GRPOConfig/PolicyConfig require it; {where}:{line}")
    taken.run("grpo.num_prompts_per_step", prompts, "the workload's prompts: one step collects them all")
    taken.run(
        "grpo.num_generations_per_prompt",
        generations,
        "the workload's generations_per_prompt (GRPO group size)",
    )
    config = nested(taken.items, "")
    # _create_advantage_estimator hands loss_fn to the estimator; GRPO's reads nothing of it.
    config.setdefault("loss_fn", {})
    return config


def nan_retries(taken: TrainerSettings) -> int | None:
    """``rollout_max_attempts_to_avoid_lp_nan`` as the actor's spin-up would have set it; None on a
    tree without the knob."""
    value = next((item.value for item in taken.items if item.key == NAN_RETRIES), None)
    return None if value is None else int(value)


def temperature(taken: TrainerSettings) -> float:
    """``policy.generation.temperature``, which NeMo RL's workers divide the logits by when they
    score a batch (``_apply_temperature_scaling``); 1.0 before it is taken."""
    value = next((item.value for item in taken.items if item.key == "policy.generation.temperature"), None)
    return 1.0 if value is None else float(value)


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
