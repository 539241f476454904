"""Where ``nemo_gym`` imports, the ``verl`` adapter's recipe runs NeMo Gym's own client against the stack.

The recipe's manager is handed NeMo Gym's real ``RolloutCollectionHelper()`` and ``BaseServerConfig``
of the stack's head server, as its ``_init_nemo_gym`` builds them, while the recipe's own folder is
imported as ``recipe.nemo_gym`` (verl's layout), so the top-level ``nemo_gym`` is NeMo Gym's. What
shows NeMo Gym's client ran is what the stack's servers saw: NeMo Gym asks the head server for the
global config with ``requests``, and the harness's ``GymClient`` records no ``/run`` of its own.
Skips where NeMo Gym is not installed, or verl's interpreter is not this one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.builder import GymShape, StackBuilder
from pytest_rollout_chaos.collector import adapters
from pytest_rollout_chaos.collector.adapters import own_gym, verl
from pytest_rollout_chaos.collector.adapters import verl_recipe as recipe_import
from pytest_rollout_chaos.collector.adapters.upstream import use_tree
from pytest_rollout_chaos.collector.protocol import CollectorSettings
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack
from pytest_rollout_chaos.trial import Trial, open_trial
from tests.collector.adapters._gym_signs import (
    arm_short_results,
    assert_nemo_gyms_client_ran,
    assert_short_results_acted,
)
from tests.collector.adapters._verl_trees import MAIN_RECIPE_TREE, recipe_tree

ROWS = 4
DEADLINE_S = 120.0

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nemo_gym") is None,
    reason="NeMo Gym is not installed in this interpreter (.ci/run installs it into verl's venv)",
)


@pytest.fixture(scope="module")
def main_recipe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """verl-recipe main, mounted as ``recipe`` as the adapter mounts it; restored afterwards."""
    tree = recipe_tree(MAIN_RECIPE_TREE, tmp_path_factory)
    saved_path = list(sys.path)
    use_tree(tree)
    verl.UPSTREAM.require()
    try:
        yield tree
    finally:
        sys.path[:] = saved_path
        recipe_import.forget()


def test_the_recipe_is_verls_recipe_package_and_nemo_gym_is_nemo_gyms(main_recipe: Path) -> None:
    assert recipe_import.root() == main_recipe
    assert verl.UPSTREAM.origin() == str(main_recipe)
    assert str(main_recipe) not in sys.path  # its nemo_gym/ folder would hide NeMo Gym's package
    found = own_gym.version()
    assert found is not None
    assert adapters.gym_client("verl").startswith(f"NeMo Gym's own (nemo-gym {found})")
    assert adapters.gym_client("verl", None, probed=True) == verl.GYM_CLIENT  # a side without it


@pytest.fixture(scope="module")
def stack(main_recipe: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosStack]:
    with ProcessKeeper(tmp_path_factory.mktemp("verl-gym-stack")) as keeper:
        yield StackBuilder(ChaosSettings(), keeper, links="layer", gym=GymShape(max_steps=4)).stack


@pytest_asyncio.fixture
async def trial(stack: ChaosStack) -> AsyncIterator[Trial]:
    stack.reset()
    async with open_trial(stack, settings=CollectorSettings(collect_timeout_s=DEADLINE_S)) as opened:
        yield opened


def collector_for(trial: Trial) -> verl.VerlCollector:
    return verl.VerlCollector(dataclasses.replace(trial.collector, model_dir=bundled.tiny_model_dir()))


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_recipe_runs_nemo_gyms_own_client_against_the_stack(trial: Trial) -> None:
    collector = collector_for(trial)
    rows = trial.stack.gym.rows("calculator", ROWS)

    rollouts = await asyncio.wait_for(collector.collect(rows, mode="train"), DEADLINE_S)

    assert sorted(rollout.row_index for rollout in rollouts) == list(range(ROWS))
    assert all(rollout.turns for rollout in rollouts), rollouts
    assert_nemo_gyms_client_ran(trial, ROWS)
    (facts,) = [event.data for event in trial.history.events(source="collector", op="gym_client")]
    assert facts["client"] == "NeMo Gym's own", facts
    assert facts["nemo_gym"] == own_gym.version(), facts
    (fit,) = [
        event for event in trial.history.events(source="collector", op="upstream") if event.kind == "invoke"
    ]
    assert verl.GYM_CLIENT not in fit.data["stood_in"]  # the report lists no stand-in for it


@pytest.mark.slow
@pytest.mark.asyncio
async def test_short_results_acts_on_nemo_gyms_own_client_and_the_recipe_raises(trial: Trial) -> None:
    collector = collector_for(trial)
    rows = trial.stack.gym.rows("calculator", ROWS)
    arm_short_results(trial, 2)

    with pytest.raises(RuntimeError, match="nemo-gym did not return results for samples"):
        await asyncio.wait_for(collector.collect(rows, mode="train"), DEADLINE_S)

    assert_short_results_acted(trial, ROWS, 2)
