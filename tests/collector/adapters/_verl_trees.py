"""The verl-recipe tree for the ``verl`` adapter's tests: unpacked once from ``tests/upstream``.

``tests.collector.adapters._trees`` finds and unpacks it, or skips saying why.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest

from pytest_rollout_chaos.collector.adapters import verl
from pytest_rollout_chaos.collector.adapters.upstream import use_tree
from tests.collector.adapters._trees import pinned_tree

RECIPE_TREE: Final = "verl-recipe-2cb1ae41"
"""verl-project/verl-recipe PR #80 (merged): the NeMo Gym recipe; the only verl tree there is."""
VERL_DEPENDENCIES: Final = ("verl", "omegaconf", "tensordict", "transformers", "ray")


@pytest.fixture(scope="session")
def verl_recipe_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe's ``git archive``, unpacked; skip without the tarball or without verl installed."""
    return pinned_tree(
        RECIPE_TREE,
        tmp_path_factory.mktemp("verl-upstream"),
        needs=VERL_DEPENDENCIES,
        holds="nemo_gym",
        trainer="verl",
    )


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
