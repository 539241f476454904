"""The NeMo RL trees validation mode is gated on: pinned ``git archive`` tarballs, unpacked.

``tests.collector.adapters._trees`` finds and unpacks them, or skips saying why (``grpo.validate`` pulls in
more dependencies than the rollout code: its loggers and its dataloader).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tests.collector.adapters._trees import pinned_tree

BASE: Final = "nemo-rl-3069f281"
"""main just before PR #2209: ``validate()`` steps the environment once per sample per turn."""
HEAD: Final = "nemo-rl-c6a661e8"
"""PR #2209's head: ``validate()`` steps it once per task group per turn."""
VALIDATE_MODULES: Final = (
    "torch",
    "numpy",
    "transformers",
    "ray",
    "datasets",
    "zmq",
    "wandb",
    "decord",
    "torchdata",
    "mlflow",
    "swanlab",
    "matplotlib",
    "prometheus_client",
    "tensorboard",
    "megatron",
    "hydra",
)


def nemo_rl_tree(name: str, into: Path) -> Path:
    """The tree of tarball ``name`` unpacked under ``into`` (once); skip when it cannot be had."""
    return pinned_tree(
        name, into, needs=VALIDATE_MODULES, holds="nemo_rl/algorithms/grpo.py", trainer="nemo_rl"
    )
