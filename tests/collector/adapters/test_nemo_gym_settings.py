"""The ``nemo_gym`` target hands ``run_examples`` NeMo Gym's own default concurrency and the stack's head.

``num_samples_in_parallel`` stays upstream's default (no limit) unless the scenario sets it; that
default is read from NeMo Gym itself where an interpreter with it is at hand.
"""

from __future__ import annotations

import subprocess

import pytest

from pytest_rollout_chaos.collector.adapters import nemo_gym
from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.servers.nemo_gym.locate import NemoGymMissingError, locate
from tests.collector.adapters._settings_context import settings_context

READ_DEFAULT = (
    "from nemo_gym.rollout_collection import SharedRolloutCollectionConfig as C; "
    "print(repr(C.model_fields['num_samples_in_parallel'].default))"
)


def test_upstreams_default_concurrency_and_the_stacks_head() -> None:
    taken = nemo_gym.settings(settings_context())
    assert [(item.key, item.value, item.source) for item in taken.items] == [
        (nemo_gym.PARALLEL, None, "upstream default"),
        ("head_server_config", None, "run"),
    ]


def test_a_scenario_may_limit_the_concurrency() -> None:
    taken = nemo_gym.settings(settings_context(**{"nemo_gym.num_samples_in_parallel": 2}))
    [asked] = [item for item in taken.items if item.source == "scenario"]
    assert (asked.key, asked.value) == (nemo_gym.PARALLEL, 2)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "4"])
def test_a_concurrency_nemo_gym_would_refuse_is_refused(value: object) -> None:
    with pytest.raises(CollectorTargetError, match=r"nemo_gym\.num_samples_in_parallel must be a positive"):
        nemo_gym.settings(settings_context(**{"nemo_gym.num_samples_in_parallel": value}))


def test_a_key_the_target_does_not_hand_upstream_is_refused() -> None:
    with pytest.raises(CollectorTargetError, match=r"no setting nemo_gym\.max_resident_rollout_tasks"):
        nemo_gym.settings(settings_context(**{"nemo_gym.max_resident_rollout_tasks": 4}))


@pytest.mark.slow  # imports NeMo Gym in its interpreter
def test_the_default_is_nemo_gyms_own() -> None:
    try:
        python = locate()
    except NemoGymMissingError as error:
        pytest.skip(f"real NeMo Gym is not available: {error}")
    done = subprocess.run(
        (str(python.path), "-c", READ_DEFAULT), capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split()[-1] == repr(nemo_gym.settings(settings_context()).items[0].value)
