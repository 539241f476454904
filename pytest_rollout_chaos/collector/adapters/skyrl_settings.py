"""The config the ``skyrl`` adapter hands SkyRL: what it sets on ``SkyRLTrainConfig()``, whose
every other field stays SkyRL's default, and the keys a scenario's ``trainer_config`` may set
(``skyrl.<key>``).

What the scenario's run sets for every collector: ``generator.max_turns``
(``ctx.settings.max_turns``), ``sampling_params.max_generate_length`` (what each generation gets
through NeMo Gym: the rows' ``max_output_tokens``, else the stack's model server's limit; SkyRL's
1024 exceeds the tiny model's context) and ``temperature``, and ``sampling_params.stop`` when the
scenario sets stop strings (``ctx.settings.stop``, ``stack.policy.stop``: SkyRL sends them with every
generate, kept in the text, and appends an EOS after a turn that ends at one, as its
``append_eos_token_after_stop_str_in_multi_turn`` says); ``n_samples_per_prompt`` is the
workload's group size (``generations_per_prompt``, 1 by default, where SkyRL's own default is 5),
not a ``trainer_config`` key. In validation (``eval_folder`` given) the same for evaluation:
``eval_n_samples_per_prompt``, the generation length and stop strings of
``eval_sampling_params`` (whose temperature stays SkyRL's, 0), and ``trainer.export_path``, a
folder of the run where ``evaluate`` dumps its results (``trainer.dump_eval_results``, on by
default).
"""

from __future__ import annotations

from typing import Final

from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings
from pytest_rollout_chaos.collector.protocol import CollectorContext
from pytest_rollout_chaos.servers.gym.stack import MAX_OUTPUT_TOKENS

SKIP_FAILED: Final = "skip_failed_rollouts"
GROUP_SIZE: Final = "generator.n_samples_per_prompt"
STOP: Final = "generator.sampling_params.stop"
EVAL_LENGTH: Final = "generator.eval_sampling_params.max_generate_length"
EVAL_STOP: Final = "generator.eval_sampling_params.stop"
EVAL_GROUP_SIZE: Final = "generator.eval_n_samples_per_prompt"
EXPORT_PATH: Final = "trainer.export_path"
LOSS_REDUCTION: Final = "trainer.algorithm.loss_reduction"
"""SkyRL's default unless the scenario asks, as is ``generator.skip_failed_rollouts``: what
``train_batch_sound`` weighs an aborted sample in the train batch by."""
KNOWN: Final = (
    "generator.max_turns",
    "generator.sampling_params.max_generate_length",
    "generator.sampling_params.temperature",
    STOP,
    EVAL_LENGTH,
    EVAL_STOP,
    "generator.inference_engine.external_proxy_url",
    "generator.inference_engine.served_model_name",
    "trainer.policy.model.path",
    f"generator.{SKIP_FAILED}",
    LOSS_REDUCTION,
)
"""The ``SkyRLTrainConfig`` keys the adapter sets: what ``trainer_config`` may set (``skyrl.<key>``).
Not ``generator.n_samples_per_prompt``: the workload's ``generations_per_prompt`` sets it."""


def settings(
    ctx: CollectorContext,
    *,
    policy_root: str,
    model_dir: str,
    n_samples_per_prompt: int = 1,
    max_generate_length: int = MAX_OUTPUT_TOKENS,
    prompts: int = 1,
    mini_batch_default: int = 1,
    eval_folder: str | None = None,
) -> TrainerSettings:
    """What the adapter sets on ``SkyRLTrainConfig()``: only what the run fixes (the policy, the
    model, the harness's limits, the scenario's stop strings, the workload's group size and
    prompts; in validation, ``eval_folder`` given, their evaluation twins and where the results
    go); every other field stays SkyRL's default, and so do ``generator.skip_failed_rollouts``
    and ``trainer.algorithm.loss_reduction`` unless the scenario (or the variant's name) asks."""
    taken = TrainerSettings("skyrl", ctx.settings.trainer_config, KNOWN)
    taken.check()
    run = ctx.settings
    taken.run("generator.max_turns", run.max_turns, "the harness's turn limit")
    taken.run(GROUP_SIZE, n_samples_per_prompt, "the workload's generations_per_prompt (GRPO group size)")
    taken.run("trainer.train_batch_size", prompts, "the workload's prompts: the step's batch")
    taken.run(
        "trainer.policy_mini_batch_size",
        min(prompts, mini_batch_default),
        "at most the step's prompts (SkyRL asserts it divides train_batch_size)",
    )
    taken.run(
        "generator.sampling_params.max_generate_length",
        max_generate_length,
        "the rows' max_output_tokens, else the stack's model server's (skyrl_prompts.generation_limit)",
    )
    taken.run("generator.sampling_params.temperature", run.temperature, "the harness's temperature")
    if run.stop:
        taken.run(STOP, list(run.stop), "the scenario's stop strings (stack.policy.stop)")
    taken.run("generator.inference_engine.external_proxy_url", policy_root, "the policy server of this stack")
    taken.run("generator.inference_engine.served_model_name", ctx.model, "the model the policy serves")
    taken.run("trainer.policy.model.path", model_dir, "the policy's model directory")
    if eval_folder is not None:
        evaluation(taken, n_samples_per_prompt, max_generate_length, eval_folder)
    for key in (f"generator.{SKIP_FAILED}", LOSS_REDUCTION):  # SkyRL's default unless asked
        if key in taken.asked:
            taken.run(key, taken.asked[key], "asked by the scenario")
    return taken


def evaluation(taken: TrainerSettings, group: int, max_generate_length: int, folder: str) -> None:
    """What validation sets besides: the fields ``evaluate`` reads in place of the training ones."""
    taken.run(EVAL_GROUP_SIZE, group, "the workload's generations_per_prompt (GRPO group size)")
    taken.run(
        EVAL_LENGTH,
        max_generate_length,
        "as sampling_params.max_generate_length, which SkyRL's config copies into eval_sampling_params "
        "when it is built (GeneratorConfig.__post_init__)",
    )
    stop = next((item.value for item in taken.items if item.key == STOP), None)
    if stop is not None:
        taken.run(EVAL_STOP, stop, "the scenario's stop strings (stack.policy.stop)")
    taken.run(EXPORT_PATH, folder, "a folder of this run: evaluate dumps its results there")
