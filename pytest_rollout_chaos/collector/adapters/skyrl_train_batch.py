"""SkyRL's training step past the generator, to the batch its policy update receives.

``RayPPOTrainer.train`` (``skyrl/train/trainer.py``, the step at lines 345-455 of the pinned
trees) calls ``self.generate`` (the generator's ``generate``, then ``validate_generator_output``)
and, under SkyRL's defaults (no dynamic sampling, no step-wise trajectories, no critic), hands
what comes back (PR #1986's placeholders included, where its flag is on) to
``postprocess_generator_output`` (per-token rewards, the reward metrics, ``zero_variance_filter``
when on), ``convert_to_training_input`` (the padded tensors, the ``uids``, the mini-batch
boundaries), ``fwd_logprobs_values_reward``, ``compute_advantages_and_returns`` (``ppo_utils``:
GRPO over the ``uids`` by default), then ``train_critic_and_policy``, whose
``_execute_training_step("policy", ...)`` scales the advantages by the loss reduction
(``_normalize_advantages``) and hands each mini-batch to the policy workers' ``forward_backward``.
Each is the trainer's own method, called in ``train``'s order on a trainer built without
``__init__``; what one raises, the step raises. The calls between them are ``train``'s lines as
written (``COPIED``: a tree whose ``train`` changed is not judged).

What is stood in (``STOOD_IN``, recorded with each call): ``RayPPOTrainer.__init__`` (the tracker,
the dataloaders, Ray's placement groups, ``build_models``' worker groups): the trainer holds its
config, the tokenizer, the generator, empty metrics, step 1, and a reference model where
``build_models`` would build one; and ``WorkerDispatch`` (the Ray worker groups): one
data-parallel rank, so nothing is padded; a forward pass of the policy or the reference model
answers with the rollout's own logprobs (the weights that generated them); ``forward_backward``
keeps the mini-batch it is handed and trains nothing, ``optim_step`` steps nothing. The batch read
out is what the policy's ``forward_backward`` calls were handed, in order.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters.copied import CopiedFrom
from pytest_rollout_chaos.collector.protocol import LossReduction, Rollout

TRAINER_MODULE: Final = "skyrl.train.trainer"
INIT_STOOD_IN: Final = (
    "RayPPOTrainer.__init__ (tracker, dataloaders, placement groups, build_models' worker groups): "
    "the trainer holds its config, tokenizer, generator, empty metrics, step 1, and a reference model "
    "where build_models would build one"
)
STOOD_IN: Final = (
    "the read-out point: the mini-batches RayPPOTrainer.train hands the policy workers' "
    "forward_backward (_execute_training_step), after postprocess_generator_output, "
    "convert_to_training_input, fwd_logprobs_values_reward, compute_advantages_and_returns and "
    "_normalize_advantages, each SkyRL's own",
    INIT_STOOD_IN,
    "WorkerDispatch (the Ray worker groups): one data-parallel rank (nothing padded); the policy's and "
    "the reference model's forward passes answer with the rollout's own logprobs; forward_backward "
    "keeps its mini-batch and trains nothing, optim_step steps nothing",
)
"""What of ``RayPPOTrainer.train``'s path from ``generate`` to the policy update is stood in."""
COPIED: Final = CopiedFrom(
    module=TRAINER_MODULE,
    function="RayPPOTrainer.train",
    fingerprints=frozenset({"81182a295ab34765"}),  # 1ec7fae4, caf4ce6f, a9564572 alike
    trees="NovaSky-AI/SkyRL 1ec7fae4, caf4ce6f and a9564572",
)
"""The method whose step ``train_step`` follows call by call, as it is at the pinned trees."""
TOKEN_MEAN: Final = "token_mean"
"""The one reduction under which an all-zero loss mask adds to neither the loss nor its divisor:
``apply_loss_reduction_to_advantages_minibatch`` divides by the mini-batch's loss-mask sum
(``ppo_utils.py``); the others count sequences, prompts or micro-batches, masked or not."""
UNSUPPORTED: Final = (
    ("generator.step_wise_trajectories", False),
    ("trainer.algorithm.dynamic_sampling.type", None),
    ("trainer.algorithm.use_kl_in_reward", False),
    ("trainer.critic.model.path", None),
)
"""Settings whose other values take branches of ``train`` this step does not follow (SkyRL's defaults)."""


@dataclass(slots=True)
class _Staged:
    """One mini-batch as ``stage_data`` would put it in the object store: rows ``[start, end)``."""

    data: Any
    start: int
    end: int


@dataclass(slots=True)
class Dispatch:
    """``WorkerDispatch`` stood in (module docstring): what ``RayPPOTrainer`` calls of it."""

    logprobs: list[list[float]] = field(default_factory=list)  # per sample, the rollout's own
    trained: list[Any] = field(default_factory=list)  # the mini-batches the policy was handed

    def get_lcm_dp_size(self) -> int:
        return 1

    def stage_data(self, model: str, data: Any, boundaries: list[tuple[int, int]]) -> list[_Staged]:
        return [_Staged(data[start:end], start, end) for start, end in boundaries]

    def forward(self, model: str, data: Any) -> Any:
        return self._answer(0, len(self.logprobs))

    def forward_from_staged(self, model: str, staged: _Staged) -> Any:
        return self._answer(staged.start, staged.end)

    def forward_backward_from_staged(self, model: str, staged: _Staged) -> Any:
        if model == "policy" and all(staged is not seen for seen in self.trained):
            self.trained.append(staged)  # once, however many update epochs hand it again
        return SimpleNamespace(metrics={})

    def optim_step(self, model: str, model_id: str | None = None) -> None:
        return None

    def empty_cache(self, model: str | None = None) -> None:
        return None

    def _answer(self, start: int, end: int) -> Any:
        outputs = [{"logprobs": row} for row in self.logprobs[start:end]]
        return SimpleNamespace(loss_fn_outputs=outputs)


def trainer(config: Any, tokenizer: Any, generator: Any) -> Any:
    """A ``RayPPOTrainer`` without ``__init__`` (STOOD_IN): what its step's methods read."""
    COPIED.require()
    for key, default in UNSUPPORTED:
        value = _at(config, key)
        if value != default:
            raise ValueError(
                f"{key} = {value!r} takes a branch of RayPPOTrainer.train the skyrl adapter does not "
                f"follow (valid here: {default!r}, SkyRL's default)"
            )
    module: Any = importlib.import_module(TRAINER_MODULE)
    made: Any = object.__new__(module.RayPPOTrainer)
    algorithm = config.trainer.algorithm
    made.cfg = config
    made.tokenizer = tokenizer
    made.generator = generator
    made.all_metrics = {}
    made.all_timings = {}
    made.global_step = 1
    made.colocate_all = config.trainer.placement.colocate_all
    made.dispatch = Dispatch()
    # build_models builds the reference group for a KL loss or a KL reward; its forward is stood in.
    made.ref_model = object() if algorithm.use_kl_loss or algorithm.use_kl_in_reward else None
    made.critic_model = None
    made.reward_kl_controller = None
    made.trajectory_logger = None
    return made


def train_step(made: Any, generator_output: Any, uids: list[str]) -> list[Any]:
    """``train``'s step from ``generate``'s output to the policy's ``forward_backward``: the
    mini-batches it was handed (``TrainingInputBatch``), in order."""
    generator_output, uids = made.postprocess_generator_output(generator_output, uids)
    training_input = made.convert_to_training_input(generator_output, uids)
    logprobs = training_input["rollout_logprobs"]
    if logprobs is None:
        raise ValueError(
            "the generator output has no rollout_logprobs: the policy's and reference model's forward "
            "passes, which the skyrl adapter stands in for with them, would compute them"
        )
    made.dispatch.logprobs = logprobs.tolist()
    training_input = made.fwd_logprobs_values_reward(training_input)
    training_input = made.compute_advantages_and_returns(training_input)
    for key in ["rewards"]:  # train's own lines, as written
        training_input.pop(key)
    training_input.metadata.pop("uids")
    training_input.metadata.pop("is_last_step", None)
    made.train_critic_and_policy(training_input)
    trained: list[Any] = made.dispatch.trained
    return trained


def loss_masks(trained: list[Any]) -> list[list[int]]:
    """Each trained sample's loss mask over its response tokens (where the batch's
    ``response_mask`` is 1), in the order ``forward_backward`` got them."""
    masks: list[list[int]] = []
    for staged in trained:
        for loss, response in zip(
            staged.data["loss_mask"].tolist(), staged.data["response_mask"].tolist(), strict=True
        ):
            masks.append([int(flag) for flag, inside in zip(loss, response, strict=True) if inside])
    return masks


def marked(rollouts: list[Rollout], trained: list[Any], config: Any) -> list[Rollout]:
    """The rollouts (row order, one per sample) marked as the batch the policy was handed holds
    them: each in it, with its loss mask and the loss reduction."""
    masks = loss_masks(trained)
    if len(masks) != len(rollouts):
        raise ValueError(
            f"the policy's forward_backward was handed {len(masks)} samples for {len(rollouts)} rows; the "
            "skyrl adapter reads them back by position and cannot tell which sample is which row"
        )
    reduction = loss_reduction(config)
    return [
        replace(rollout, in_train_batch=True, loss_mask=mask, loss_reduction=reduction)
        for rollout, mask in zip(rollouts, masks, strict=True)
    ]


def loss_reduction(config: Any) -> LossReduction:
    """SkyRL's ``trainer.algorithm.loss_reduction``, and whether it is per token (``TOKEN_MEAN``)."""
    value = config.trainer.algorithm.loss_reduction
    return LossReduction(
        per_token=value == TOKEN_MEAN, setting=f"trainer.algorithm.loss_reduction = {value!r}"
    )


def _at(config: Any, key: str) -> Any:
    for part in key.split("."):
        config = getattr(config, part)
    return config
