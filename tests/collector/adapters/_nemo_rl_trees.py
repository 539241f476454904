"""The NeMo RL trees the ``nemo_rl`` adapter's tests drive: pinned ``git archive`` tarballs, unpacked.

``tests.collector.adapters._trees`` finds and unpacks them, or skips saying why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tests.collector.adapters._trees import pinned_tree

BASE: Final = "nemo-rl-3eebe4da"
"""main just before PR #2394: a row the Gym never returned stays a ``None`` slot."""
HEAD: Final = "nemo-rl-964b609a"
"""PR #2394's head: fewer rollouts than rows is a ``RuntimeError``."""
TRAINER_MODULES: Final = (
    "torch",
    "numpy",
    "PIL",
    "requests",
    "transformers",
    "ray",
    "datasets",
    "fastapi",
    "uvicorn",
    "zmq",
    "rich",
    "tqdm",
    "wandb",
    "decord",
)


def nemo_rl_tree(name: str, into: Path) -> Path:
    """The tree of tarball ``name`` unpacked under ``into`` (once); skip when it cannot be had."""
    return pinned_tree(name, into, needs=TRAINER_MODULES, holds="nemo_rl", trainer="nemo_rl")
