"""The verl-recipe trees for the ``verl`` adapter's tests: unpacked from ``tests/upstream``.

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
from pytest_rollout_chaos.collector.adapters import verl_recipe as recipe_import
from pytest_rollout_chaos.collector.adapters.upstream import use_tree
from tests.collector.adapters._trees import pinned_tree

RECIPE_TREE: Final = "verl-recipe-2cb1ae41"
"""verl-project/verl-recipe PR #80 (merged): the NeMo Gym recipe as it came in."""
MAIN_RECIPE_TREE: Final = "verl-recipe-48ea0a79"
"""verl-recipe main: the same recipe after #87's renames and #104; its collection code is PR #80's."""
RECIPE_TREES: Final = (RECIPE_TREE, MAIN_RECIPE_TREE)
VERL_DEPENDENCIES: Final = ("verl", "omegaconf", "tensordict", "transformers", "ray")


def recipe_tree(name: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe's ``git archive`` ``name``, unpacked; skip without it or without verl installed."""
    return pinned_tree(
        name,
        tmp_path_factory.mktemp("verl-upstream"),
        needs=VERL_DEPENDENCIES,
        holds="nemo_gym",
        trainer="verl",
    )


@pytest.fixture(scope="session")
def verl_recipe_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PR #80's tree (``RECIPE_TREE``), unpacked."""
    return recipe_tree(RECIPE_TREE, tmp_path_factory)


@pytest.fixture(scope="session")
def verl_recipe_main_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl-recipe main's tree (``MAIN_RECIPE_TREE``), unpacked."""
    return recipe_tree(MAIN_RECIPE_TREE, tmp_path_factory)


@pytest.fixture(scope="session", params=RECIPE_TREES)
def verl_recipe(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ModuleType]:
    """``recipe.nemo_gym.agent_loop`` from each tree in turn, the tree mounted as ``recipe`` as the
    adapter mounts it; ``sys.path`` and the recipe's modules are restored afterwards."""
    tree = recipe_tree(request.param, tmp_path_factory)
    saved_path = list(sys.path)
    use_tree(tree)
    verl.UPSTREAM.require()
    try:
        yield importlib.import_module(verl.RECIPE_MODULE)
    finally:
        sys.path[:] = saved_path
        recipe_import.forget()
