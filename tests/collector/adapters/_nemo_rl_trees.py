"""The NeMo RL trees the ``nemo_rl`` adapter's tests drive: pinned ``git archive`` tarballs, unpacked.

``tests.collector.adapters._trees`` finds and unpacks them, or skips saying why.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.collector.adapters.upstream import use_tree
from tests.collector.adapters._trees import pinned_tree

BASE: Final = "nemo-rl-3eebe4da"
"""main just before PR #2394: a row the Gym never returned stays a ``None`` slot."""
HEAD: Final = "nemo-rl-964b609a"
"""PR #2394's head: fewer rollouts than rows is a ``RuntimeError``."""
MAIN: Final = "nemo-rl-7ea279ab"
"""NeMo RL main after #3000: the streaming actor, a pydantic ``MasterConfig``, its own copy of
``grpo_train``'s step (``nemo_rl_step_7ea279ab``)."""
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
MAIN_MODULES: Final = ("tensordict",)
"""What main imports beyond the older trees (``nemo_rl.data_plane``, which ``grpo`` imports)."""


def nemo_rl_tree(name: str, into: Path) -> Path:
    """The tree of tarball ``name`` unpacked under ``into`` (once); skip when it cannot be had."""
    needs = TRAINER_MODULES + (MAIN_MODULES if name == MAIN else ())
    return pinned_tree(name, into, needs=needs, holds="nemo_rl", trainer="nemo_rl")


@contextlib.contextmanager
def tree_imported(name: str, into: Path) -> Iterator[Path]:
    """``nemo_rl_tree(name, into)`` first on ``sys.path`` while inside; ``sys.path`` and NeMo RL's
    modules restored after, so the next tree's tests import their own."""
    tree = nemo_rl_tree(name, into)
    saved = list(sys.path)
    use_tree(tree)
    try:
        yield tree
    finally:
        sys.path[:] = saved
        for module in [
            module for module in sys.modules if module == "nemo_rl" or module.startswith("nemo_rl.")
        ]:
            del sys.modules[module]
