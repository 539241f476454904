"""The NeMo RL trees the ``nemo_rl`` adapter's tests drive: pinned ``git archive`` tarballs, unpacked.

The tarballs sit beside the repository (``../shared/upstream``); a fresh clone has none, and
the plain project venv lacks NeMo RL's dependencies: either way the tests that need a tree
skip, saying which.
"""

from __future__ import annotations

import importlib.util
import tarfile
from pathlib import Path
from typing import Final

import pytest

REPO: Final = Path(__file__).resolve().parents[2]
UPSTREAM_DIR: Final = REPO.parent / "shared" / "upstream"
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


def missing_trainer_modules() -> list[str]:
    """NeMo RL's third-party imports this interpreter cannot find."""
    return [name for name in TRAINER_MODULES if importlib.util.find_spec(name) is None]


def nemo_rl_tree(name: str, into: Path) -> Path:
    """The tree of tarball ``name`` unpacked under ``into`` (once); skip when it cannot be had."""
    missing = missing_trainer_modules()
    if missing:
        pytest.skip(f"NeMo RL's dependencies are not installed here (missing: {', '.join(missing)})")
    tarball = UPSTREAM_DIR / f"{name}.tar.gz"
    if not tarball.is_file():
        pytest.skip(f"no {tarball.name} in {UPSTREAM_DIR} (the pinned upstream trees sit beside the repo)")
    tree = into / name
    if not tree.is_dir():
        with tarfile.open(tarball) as archive:
            archive.extractall(into, filter="data")
    if not (tree / "nemo_rl").is_dir():
        raise AssertionError(f"{tarball} did not unpack to {tree}/nemo_rl")
    return tree
