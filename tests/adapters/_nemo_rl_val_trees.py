"""The NeMo RL trees validation mode is gated on: pinned ``git archive`` tarballs, unpacked.

The tarballs sit beside the repository (``../shared/upstream``); a fresh clone has none, and the
plain project venv lacks NeMo RL's dependencies (``grpo.validate`` pulls in more of them than the
rollout code: its loggers and its dataloader): either way the tests that need a tree skip,
saying which.
"""

from __future__ import annotations

import importlib.util
import tarfile
from pathlib import Path
from typing import Final

import pytest

REPO: Final = Path(__file__).resolve().parents[2]
UPSTREAM_DIR: Final = REPO.parent / "shared" / "upstream"
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
)


def missing_modules() -> list[str]:
    """The third-party modules ``nemo_rl.algorithms.grpo`` imports that this interpreter lacks."""
    return [name for name in VALIDATE_MODULES if importlib.util.find_spec(name) is None]


def nemo_rl_tree(name: str, into: Path) -> Path:
    """The tree of tarball ``name`` unpacked under ``into`` (once); skip when it cannot be had."""
    missing = missing_modules()
    if missing:
        pytest.skip(f"NeMo RL's validate() cannot be imported here (missing: {', '.join(missing)})")
    tarball = UPSTREAM_DIR / f"{name}.tar.gz"
    if not tarball.is_file():
        pytest.skip(f"no {tarball.name} in {UPSTREAM_DIR} (the pinned upstream trees sit beside the repo)")
    tree = into / name
    if not tree.is_dir():
        with tarfile.open(tarball) as archive:
            archive.extractall(into, filter="data")
    if not (tree / "nemo_rl" / "algorithms" / "grpo.py").is_file():
        raise AssertionError(f"{tarball} did not unpack to {tree}/nemo_rl")
    return tree
