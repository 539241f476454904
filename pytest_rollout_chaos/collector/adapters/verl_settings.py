"""The config the ``verl`` adapter hands verl: the rollout config the recipe's manager reads and the
``algorithm`` keys ``RayPPOTrainer.fit`` reads past generation, each verl's own default (verl
0.9.1's YAML, the line of each) unless the run fixes it or the scenario's ``trainer_config`` asks
(``verl.<key>``).
"""

from __future__ import annotations

from typing import Any, Final

from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings
from pytest_rollout_chaos.collector.protocol import CollectorContext

ROLLOUT_YAML: Final = "verl/trainer/config/rollout/rollout.yaml"
ROLLOUT_DEFAULTS: Final[tuple[tuple[str, Any, int], ...]] = (
    ("temperature", 1.0, 17),
    ("top_p", 1, 23),
    ("prompt_length", 512, 35),  # ${oc.select:data.max_prompt_length,512}
    ("response_length", 512, 39),  # ${oc.select:data.max_response_length,512}
    ("max_model_len", None, 81),
    ("engine_kwargs.vllm", {}, 142),
    ("val_kwargs.top_p", 1.0, 161),
    ("val_kwargs.temperature", 0, 164),
)
"""The rollout config keys the recipe's manager reads, with verl's own defaults (``ROLLOUT_YAML`` of
verl 0.9.1, the line of each): the manager gets ``actor_rollout_ref.rollout`` of verl's config."""
TRAINER_YAML: Final = "verl/trainer/config/_generated_ppo_trainer.yaml"
ALGORITHM_DEFAULTS: Final[tuple[tuple[str, Any, int], ...]] = (
    ("rollout_correction.rollout_is", None, 851),
    ("rollout_correction.rollout_is_threshold", 2.0, 852),
    ("rollout_correction.rollout_rs", None, 853),
    ("rollout_correction.rollout_rs_threshold", None, 854),
    ("rollout_correction.bypass_mode", False, 855),
    ("rollout_correction.rollout_is_batch_normalize", False, 857),
    ("gamma", 1.0, 859),
    ("lam", 1.0, 860),
    ("norm_adv_by_std_in_grpo", True, 862),
    ("use_kl_in_reward", False, 869),
)
"""What ``RayPPOTrainer.fit`` reads of ``algorithm`` from generation to ``update_actor``, with verl's
own defaults (``TRAINER_YAML`` of verl 0.9.1, the line of each)."""
RECIPE_SCRIPT: Final = "nemo_gym/submit_math.sh"
KNOWN: Final = (
    *(f"actor_rollout_ref.rollout.{key}" for key, _, _ in ROLLOUT_DEFAULTS),
    "algorithm.adv_estimator",
    *(f"algorithm.{key}" for key, _, _ in ALGORITHM_DEFAULTS),
)


def settings(ctx: CollectorContext, *, validate: bool = False, n: int = 1) -> TrainerSettings:
    """The rollout config the manager gets: verl's defaults unless the scenario's ``trainer_config``
    asks otherwise (``verl.actor_rollout_ref.rollout.<key>``), and the group size ``n`` (``rollout.n``,
    in validation ``val_kwargs.n``): verl's default 1, else the workload's ``generations_per_prompt``."""
    taken = TrainerSettings("verl", ctx.settings.trainer_config, KNOWN)
    taken.check()
    for key, default, line in ROLLOUT_DEFAULTS:
        taken.default(f"actor_rollout_ref.rollout.{key}", default, f"{ROLLOUT_YAML}:{line} (verl 0.9.1)")
    key, line = ("val_kwargs.n", N_LINES[1]) if validate else ("n", N_LINES[0])
    if n == 1:
        taken.default(f"actor_rollout_ref.rollout.{key}", 1, f"{ROLLOUT_YAML}:{line} (verl 0.9.1)")
    else:
        taken.run(
            f"actor_rollout_ref.rollout.{key}", n, "the workload's generations_per_prompt (GRPO group size)"
        )
    taken.run(
        "algorithm.adv_estimator",
        "grpo",
        f"the recipe's scripts run GRPO ({RECIPE_SCRIPT}:109; verl's default, gae, needs a critic)",
    )
    for key, default, line in ALGORITHM_DEFAULTS:
        taken.default(f"algorithm.{key}", default, f"{TRAINER_YAML}:{line} (verl 0.9.1)")
    return taken


N_LINES: Final = (127, 167)
"""Where ``rollout.yaml`` (verl 0.9.1) sets ``n`` and ``val_kwargs.n`` to 1. Not in ``KNOWN``: the
workload's ``generations_per_prompt`` sets the group size, a ``trainer_config`` key may not."""


def n_key(validate: bool) -> str:
    """The setting that sizes a group: ``val_kwargs.n`` in validation (``_validate``), else ``n``."""
    return "val_kwargs.n" if validate else "n"
