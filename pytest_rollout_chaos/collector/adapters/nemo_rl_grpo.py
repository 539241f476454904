"""NeMo RL's ``nemo_rl.algorithms.grpo`` for the ``nemo_rl`` adapter: imported, and what the
adapter's copies of ``grpo_train``'s step past the rollout hand back (``TrainBatch``).

**Imports.** ``nemo_rl.algorithms.grpo`` imports NeMo RL's dataset package, whose audio datasets
(``eval_datasets/mmau.py``, ``response_datasets/avqa.py``, ``audiomcq.py``) import ``soundfile``
and ``scipy.signal`` at module level; nothing on this path reads audio. Where they are not
installed they are stubbed for that import only (``STUBBED``: each name they give refuses to
run), as the ``slime`` adapter stubs what slime imports and does not use here; where they are,
the real ones are imported. ``transformers`` asks at import time whether those packages exist
(``AutoProcessor`` pulls in its audio utilities), and a stub has no import spec to answer with:
so it is imported, with what ``grpo`` takes from it, before the stubs go in.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass
from typing import Any, Final

GRPO_MODULE: Final = "nemo_rl.algorithms.grpo"
STUBBED: Final = ("soundfile", "scipy", "scipy.signal")
PROBING: Final = ("transformers", "transformers.models.auto.processing_auto")
"""What asks for the stubbed packages' import specs, imported before the stubs go in."""


def load_grpo() -> Any:
    """``nemo_rl.algorithms.grpo``, imported with the audio libraries stubbed where they are not
    installed; the stubs leave ``sys.modules`` once the import is done, so nothing else sees them."""
    stubbed = [name for name in STUBBED if name not in sys.modules and _missing(name)]
    if stubbed:
        for name in PROBING:
            if importlib.util.find_spec(name.partition(".")[0]) is not None:
                importlib.import_module(name)
    for name in stubbed:
        sys.modules[name] = _Refusing(name)
    try:
        return importlib.import_module(GRPO_MODULE)
    finally:
        for name in stubbed:
            sys.modules.pop(name, None)


def _missing(name: str) -> bool:
    parent = name.partition(".")[0]
    return importlib.util.find_spec(parent) is None


class _Refusing(types.ModuleType):
    """A module NeMo RL imports and this path never uses: each name it gives refuses to run."""

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        name = f"{self.__name__}.{attribute}"

        def refuse(*args: object, **kwargs: object) -> None:
            raise ModuleNotFoundError(
                f"{self.__name__} is not installed: the nemo_rl adapter stubbed it for NeMo RL's "
                f"imports, and {name} was called"
            )

        return refuse


def typed_config(grpo: Any, config: dict[str, Any]) -> Any:
    """The master config as the tree's ``grpo`` types it: the plain dict where its ``MasterConfig``
    is a ``TypedDict`` (before NeMo RL #3000); its pydantic ``MasterConfig`` after, built as NeMo
    RL's own unit tests build one (``model_construct``), each section of its own config class
    (``GRPOConfig``, ``ClippedPGLossConfig``, ``RewardPenaltyConfig``) validated from the settings,
    so what they do not name is that class's default. No logger runs: W&B is off."""
    model = getattr(grpo, "MasterConfig", None)
    if not callable(getattr(model, "model_construct", None)):
        return config
    return model.model_construct(  # type: ignore[union-attr]
        grpo=grpo.GRPOConfig.model_validate(config.get("grpo", {})),
        loss_fn=grpo.ClippedPGLossConfig.model_validate(config.get("loss_fn", {})),
        reward_penalties=grpo.RewardPenaltyConfig.model_validate(config.get("reward_penalties", {})),
        policy=config.get("policy", {}),
        env=config.get("env", {}),
        logger={"wandb_enabled": False, "wandb": {}, **config.get("logger", {})},
    )


@dataclass(frozen=True, slots=True)
class TrainBatch:
    """What ``policy.train`` would get, and the batch it was made from."""

    train_data: Any  # BatchedDataDict[ClippedPGLossDataDict]
    repeated_batch: Any  # the rollout's final_batch after rewards, baselines and masks
    rewards: Any  # the rewards the advantages were computed from
    complete: bool  # dynamic sampling's is_batch_complete: False, and grpo_train generates again
