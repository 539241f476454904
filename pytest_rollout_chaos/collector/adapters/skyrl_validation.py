"""Validation through SkyRL's own evaluation, for the ``skyrl`` adapter's validation mode.

``RayPPOTrainer.eval`` (``skyrl/train/trainer.py``, what ``train`` runs before its first step
and every ``trainer.eval_interval`` steps) calls ``skyrl.train.evaluate.evaluate``: for each batch
of its eval dataloader, ``prepare_generator_input`` with ``generator.eval_n_samples_per_prompt``
and ``generator.eval_sampling_params``, the generator's ``generate`` (the same
``SkyRLGymGenerator`` and ``agent_loop`` as in training), ``validate_generator_output``; then the
per-dataset metrics, and the dump of the results (``trainer.dump_eval_results``, on by default).
What the generator raises, ``evaluate`` raises, and so does the collection; nothing is trained.

What is stood in (``STOOD_IN``): the eval dataloader (one batch of the adapter's prompts, where
SkyRL's batches ``trainer.eval_batch_size`` prompts of its eval dataset), the tracker (none:
``eval`` hands it to ``evaluate`` for the trajectory logger, off by default), the global step (0,
as before training's first step) and the read-out
point: ``evaluate`` returns only metrics, so the generator's ``generate`` is wrapped to keep the
``GeneratorOutput`` it hands ``evaluate``, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

STOOD_IN: Final = (
    "the eval dataloader: one batch of the adapter's prompts (RayPPOTrainer's holds "
    "trainer.eval_batch_size prompts of its eval dataset a batch)",
    "the tracker: none (RayPPOTrainer.eval hands it to evaluate for the trajectory logger, off by default)",
    "the global step: 0, where RayPPOTrainer.train evaluates before its first (trainer.eval_before_train)",
    "the read-out point: the generator's generate wrapped to keep the GeneratorOutput it hands "
    "evaluate (which returns only metrics), unchanged",
)
"""What of ``RayPPOTrainer.eval``'s path is stood in, beyond the trainer built without ``__init__``."""
CALL: Final = "skyrl.train.trainer.RayPPOTrainer.eval (skyrl.train.evaluate.evaluate)"
READ_OUT: Final = "the GeneratorOutput SkyRLGymGenerator.generate hands evaluate"
GLOBAL_STEP: Final = 0
"""The step ``train`` evaluates at before its first (``trainer.eval_before_train``)."""


async def evaluate(made: Any, prompts: Sequence[dict[str, Any]]) -> Any:
    """``made.eval()`` (``RayPPOTrainer.eval``, on a trainer built without ``__init__``) over one
    eval batch of ``prompts``; the ``GeneratorOutput`` its generator handed ``evaluate``."""
    generator = made.generator
    generate = generator.generate
    handed: list[Any] = []

    async def kept(batch: Any) -> Any:
        output = await generate(batch)
        handed.append(output)
        return output

    generator.generate = kept
    made.eval_dataloader = [list(prompts)]
    made.tracker = None
    made.global_step = GLOBAL_STEP
    try:
        await made.eval()
    finally:
        del generator.generate  # the class's own again
    [output] = handed
    return output
