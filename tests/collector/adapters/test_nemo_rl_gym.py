"""Where ``nemo_gym`` imports, the ``nemo_rl`` adapter's actor runs NeMo Gym's own client against the stack.

NeMo RL main's ``NemoGym.run_rollouts`` (the pinned tree) is handed NeMo Gym's real
``RolloutCollectionHelper()`` and ``BaseServerConfig`` of the stack's head server. What shows it
ran is what the stack's servers saw, in the History: NeMo Gym's client asks the head server for
the global config with ``requests`` at every ``run_examples`` (the harness's ``GymClient`` is
given the agents' addresses and never asks), and the harness's client's own record of each
``/run`` is absent. The ``short_results`` fault armed on the collection's Gym client acts on NeMo
Gym's client too. Skips where NeMo Gym is not installed, or NeMo RL's interpreter is not this one.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from pytest_rollout_chaos.builder import GymShape, StackBuilder
from pytest_rollout_chaos.collector import adapters
from pytest_rollout_chaos.collector.adapters import nemo_rl, own_gym
from pytest_rollout_chaos.collector.protocol import CollectorSettings
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack
from pytest_rollout_chaos.trial import Trial, open_trial
from tests.collector.adapters._gym_signs import (
    arm_short_results,
    assert_nemo_gyms_client_ran,
    assert_short_results_acted,
    config_asked,
)
from tests.collector.adapters._nemo_rl_trees import MAIN, tree_imported

ROWS = 4
DEADLINE_S = 120.0

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nemo_gym") is None,
    reason="NeMo Gym is not installed in this interpreter (.ci/run installs it into NeMo RL's venv)",
)


def test_the_report_names_nemo_gyms_own_client_with_its_version_and_the_stand_in_without_it() -> None:
    found = own_gym.version()
    assert found is not None
    assert adapters.gym_client("nemo_rl").startswith(f"NeMo Gym's own (nemo-gym {found})")
    assert adapters.gym_client("nemo_rl", None, probed=True) == nemo_rl.GYM_CLIENT  # a side without it
    assert adapters.gym_client("nemo_rl", "0.5.1", probed=True).startswith("NeMo Gym's own (nemo-gym 0.5.1)")


@pytest.fixture(scope="module")
def main_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """NeMo RL main, first on ``sys.path``; ``sys.path`` and NeMo RL's modules restored after."""
    with tree_imported(MAIN, tmp_path_factory.mktemp("nemo-rl-main")) as tree:
        yield tree


@pytest.fixture(scope="module")
def stack(main_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosStack]:
    with ProcessKeeper(tmp_path_factory.mktemp("gym-client-stack")) as keeper:
        yield StackBuilder(ChaosSettings(), keeper, links="layer", gym=GymShape(max_steps=4)).stack


@pytest_asyncio.fixture
async def trial(stack: ChaosStack) -> AsyncIterator[Trial]:
    stack.reset()
    async with open_trial(stack, settings=CollectorSettings(collect_timeout_s=DEADLINE_S)) as opened:
        yield opened


@pytest.mark.slow
@pytest.mark.asyncio
async def test_nemo_rls_actor_runs_nemo_gyms_own_client_against_the_stack(trial: Trial) -> None:
    collector = nemo_rl.NemoRLCollector(trial.collector)
    rows = trial.stack.gym.rows("calculator", ROWS)

    rollouts = await asyncio.wait_for(collector.collect(rows, mode="train"), DEADLINE_S)

    assert sorted(rollout.row_index for rollout in rollouts) == list(range(ROWS))
    assert_nemo_gyms_client_ran(trial, ROWS)
    assert len(config_asked(trial)) == 1, trial.history.timeline()  # once per run_examples call
    upstream = trial.history.events(source="collector", op="upstream")
    (facts,) = [event.data for event in upstream if "client" in event.data]
    assert facts["client"] == "NeMo Gym's own", facts
    assert facts["nemo_gym"] == own_gym.version(), facts


@pytest.mark.slow
@pytest.mark.asyncio
async def test_short_results_acts_on_nemo_gyms_own_client_and_main_raises(trial: Trial) -> None:
    collector = nemo_rl.NemoRLCollector(trial.collector)
    rows = trial.stack.gym.rows("calculator", ROWS)
    arm_short_results(trial, 2)

    # main's caller names the rows that never came (the stream ended early), as with the stand-in
    with pytest.raises(RuntimeError, match="missing row indices"):
        await asyncio.wait_for(collector.collect(rows, mode="train"), DEADLINE_S)

    assert_short_results_acted(trial, ROWS, 2)
