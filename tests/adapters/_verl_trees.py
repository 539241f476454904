"""The verl-recipe tree for the ``verl`` adapter's tests: unpacked once from ``shared/upstream``.

A fresh clone has no ``shared/`` beside it, and the plain project venv has no verl: either way
the tests that need the tree skip, saying which.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest

from pytest_rollout_chaos.collector.adapters import verl
from pytest_rollout_chaos.collector.adapters.upstream import use_tree

REPO: Final = Path(__file__).resolve().parents[2]
SHARED_UPSTREAM: Final = REPO.parent / "shared" / "upstream"
RECIPE_TREE: Final = "verl-recipe-2cb1ae41"
"""verl-project/verl-recipe PR #80 (merged): the NeMo Gym recipe; the only verl tree there is."""
VERL_DEPENDENCIES: Final = ("verl", "omegaconf", "tensordict", "transformers", "ray")


@pytest.fixture(scope="session")
def verl_recipe_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe's ``git archive``, unpacked; skip without the tarball or without verl installed."""
    tarball = SHARED_UPSTREAM / f"{RECIPE_TREE}.tar.gz"
    if not tarball.is_file():
        pytest.skip(f"{tarball} is absent (the shared upstream trees sit beside a full checkout only)")
    missing = [name for name in VERL_DEPENDENCIES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"verl's dependencies are not importable ({', '.join(missing)}): {verl.UPSTREAM.install}")
    folder = tmp_path_factory.mktemp("verl-upstream")
    with tarfile.open(tarball) as archive:
        archive.extractall(folder, filter="data")
    return folder / RECIPE_TREE


@pytest.fixture(scope="session")
def verl_recipe(verl_recipe_tree: Path) -> Iterator[ModuleType]:
    """``nemo_gym.agent_loop`` from the tree; ``sys.path`` and the recipe's modules are restored
    afterwards, since real NeMo Gym's package has the same top-level name."""
    saved_path = list(sys.path)
    use_tree(verl_recipe_tree)
    verl.UPSTREAM.require()
    try:
        yield importlib.import_module(verl.RECIPE_MODULE)
    finally:
        sys.path[:] = saved_path
        for name in [name for name in sys.modules if name == "nemo_gym" or name.startswith("nemo_gym.")]:
            del sys.modules[name]
