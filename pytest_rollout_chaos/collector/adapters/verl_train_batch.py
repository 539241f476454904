"""verl's PPO step past generation, to the ``DataProto`` its ``update_actor`` would get.

``RayPPOTrainer.fit`` (``verl/trainer/ppo/ray_trainer.py`` of verl 0.9.1, lines 1478-1690) builds
the step's batch from the dataloader's dict, gives every prompt a ``uid``, splits off the
generation batch (``_get_gen_batch``), repeats it ``rollout.n`` times, has the agent loop
manager generate, then repeats the batch, ``union``s the generation output into it, computes the
response mask where missing, the global token count, reads the rewards (``extract_reward``),
sets ``old_log_probs``, writes ``token_level_scores`` and ``token_level_rewards``, computes the
rollout-correction metrics and response mask (``compute_rollout_correction_and_add_to_batch``),
and the advantages (``compute_advantage``); then ``_update_actor(batch)``. Each named function is
verl's own, called as ``fit`` calls it; what one raises is what ``train_batch`` raises.

What is stood in (``STOOD_IN``, recorded with each call):

- ``_balance_batch`` (reorders rows across the actor's data-parallel ranks): one rank, the order kept;
- ``_compute_old_log_prob`` (the actor workers' forward pass): ``old_log_probs`` are the batch's
  ``rollout_log_probs``, the logprobs of the weights that generated it (verl's bypass mode does
  the same); without ``rollout_log_probs`` there is nothing to stand in with, and it raises;
- the metrics of the step (``calculate_debug_metrics``, entropy, timing) are not computed;
- no reference policy and no critic: GRPO without a KL loss, as the recipe's scripts run it.
"""

from __future__ import annotations

import importlib
import uuid
from dataclasses import dataclass
from typing import Any, Final

STOOD_IN: Final = (
    "RayPPOTrainer._balance_batch (the actor's data-parallel ranks): one rank, the row order kept",
    "RayPPOTrainer._compute_old_log_prob (the actor workers): old_log_probs are the batch's "
    "rollout_log_probs, the logprobs of the weights that generated it",
    "the step's metrics (calculate_debug_metrics, entropy, timing): not computed",
    "no reference policy and no critic: GRPO without a KL loss, as the recipe's scripts run it",
    "the batch's temperature (fit's batch.meta_info['temperature']): not set; only the stood-in "
    "old-logprob pass reads it",
)
"""What of ``RayPPOTrainer.fit``'s path from the prompts to ``update_actor`` is stood in."""
TRAINER_MODULE: Final = "verl.trainer.ppo.ray_trainer"


@dataclass(frozen=True, slots=True)
class Step:
    """The step's batch as ``fit`` builds it before generation, and the generation batch."""

    batch: Any  # DataProto: the dataloader's dict with a uid per prompt
    gen_batch: Any  # DataProto: what the agent loop manager is handed


def before_generation(prompts: Any, *, n: int, global_steps: int) -> Step:
    """``fit``'s lines before ``generate_sequences``: the uid, ``_get_gen_batch``, the repeat."""
    trainer = importlib.import_module(TRAINER_MODULE)
    np: Any = importlib.import_module("numpy")  # verl's own dependency, not the plugin's
    batch = prompts
    batch.non_tensor_batch["uid"] = np.array(
        [str(uuid.uuid4()) for _ in range(len(batch.batch))], dtype=object
    )
    gen_batch = trainer.RayPPOTrainer._get_gen_batch(None, batch)  # reads nothing of self
    gen_batch.meta_info["global_steps"] = global_steps
    return Step(batch, gen_batch.repeat(repeat_times=n, interleave=True))


def train_batch(step: Step, output: Any, algorithm: dict[str, Any], *, n: int) -> Any:
    """``fit``'s lines from the generation output to the batch ``_update_actor`` gets."""
    trainer = importlib.import_module(TRAINER_MODULE)
    reward = importlib.import_module("verl.trainer.ppo.reward")
    np: Any = importlib.import_module("numpy")
    output.meta_info.pop("timing", None)
    batch = step.batch.repeat(repeat_times=n, interleave=True)
    batch = batch.union(output)
    if "response_mask" not in batch.batch.keys():  # noqa: SIM118  # fit's own line
        batch.batch["response_mask"] = trainer.compute_response_mask(batch)
    # _balance_batch: STOOD_IN (one rank).
    batch.meta_info["global_token_num"] = trainer.torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
    images_seqlens_all = []
    for multi_modal_input in batch.non_tensor_batch["multi_modal_inputs"]:
        if "image_grid_thw" not in multi_modal_input.keys():  # noqa: SIM118  # fit's own line
            continue
        images_seqlens_all.extend(multi_modal_input["images_seqlens"].tolist())
    batch.meta_info["images_seqlens"] = images_seqlens_all
    reward_tensor, reward_extra_infos_dict = reward.extract_reward(batch)

    rollout_corr_config = algorithm.get("rollout_correction")
    if rollout_corr_config is not None and rollout_corr_config.get("bypass_mode", False):
        raise ValueError(
            "algorithm.rollout_correction.bypass_mode: true takes verl's apply_bypass_mode path, which needs "
            "the actor's policy-loss config this adapter does not hold (valid here: false, verl's default)"
        )
    # _compute_old_log_prob: STOOD_IN by the rollout's own logprobs (bypass_mode is off by default).
    if "rollout_log_probs" not in batch.batch:
        raise KeyError(
            "the generation output has no rollout_log_probs: verl's _compute_old_log_prob, which this "
            "adapter stands in for with them, would compute old_log_probs from the actor"
        )
    batch.batch["old_log_probs"] = batch.batch["rollout_log_probs"].clone()

    batch.batch["token_level_scores"] = reward_tensor
    if reward_extra_infos_dict:
        batch.non_tensor_batch.update({k: np.array(v) for k, v in reward_extra_infos_dict.items()})
    if algorithm["use_kl_in_reward"]:
        raise ValueError(
            "algorithm.use_kl_in_reward: true needs the reference policy, which this adapter does not stand "
            "in for (valid here: false, verl's default)"
        )
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    if rollout_corr_config is not None and "rollout_log_probs" in batch.batch:
        helper = importlib.import_module("verl.trainer.ppo.rollout_corr_helper")
        batch, _ = helper.compute_rollout_correction_and_add_to_batch(batch, rollout_corr_config)
    return trainer.compute_advantage(
        batch,
        adv_estimator=algorithm["adv_estimator"],
        gamma=algorithm["gamma"],
        lam=algorithm["lam"],
        num_repeat=n,
        norm_adv_by_std_in_grpo=algorithm.get("norm_adv_by_std_in_grpo", True),
        config=algorithm,
    )
