"""What an adapter gives its trainer, taken key by key: upstream's default, the run's, or the scenario's."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from pytest_rollout_chaos.collector.adapters.trainer_settings import (
    Setting,
    TrainerSettings,
    describe,
    nested,
    recorded,
)
from pytest_rollout_chaos.collector.protocol import CollectorSettings
from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.history import History

ASKED = {"slime.rollout_seed": 7, "nemo_rl.grpo.max_rollout_turns": 2}


def test_the_scenario_wins_over_the_default_and_other_trainers_keys_are_ignored() -> None:
    taken = TrainerSettings("slime", ASKED, ["rollout_seed", "rollout_top_p"])
    taken.check()
    assert taken.default("rollout_seed", 42, "arguments.py") == 7
    assert taken.default("rollout_top_p", 1.0, "arguments.py") == 1.0
    assert taken.items == [
        Setting("rollout_seed", 7, "scenario", "arguments.py"),
        Setting("rollout_top_p", 1.0, "upstream default", "arguments.py"),
    ]


def test_a_key_of_this_trainer_it_is_not_given_is_refused_naming_the_valid_ones() -> None:
    with pytest.raises(CollectorTargetError) as raised:
        TrainerSettings("slime", ASKED, ["rollout_top_p"]).check()
    assert str(raised.value) == (
        "workload.trainer_config: the slime adapter hands upstream no setting slime.rollout_seed "
        "(valid: slime.rollout_top_p)"
    )
    with pytest.raises(
        ValueError, match=r"unknown trainer 'openrlhf' \(valid: nemo_rl, slime, verl, skyrl, nemo_gym\)"
    ):
        TrainerSettings("openrlhf", {})


def test_settings_nest_as_upstream_reads_them_and_are_recorded_once_per_collection() -> None:
    taken = TrainerSettings("nemo_rl", ASKED, ["grpo.max_rollout_turns"])
    taken.run("grpo.max_rollout_turns", 4, "the harness's")
    taken.default("policy.generation.vllm_cfg.async_engine", False, "grpo.py:992")
    assert nested(taken.items, "") == {
        "grpo": {"max_rollout_turns": 2},
        "policy": {"generation": {"vllm_cfg": {"async_engine": False}}},
    }
    assert nested(taken.items, "policy.generation") == {"vllm_cfg": {"async_engine": False}}
    history = History()
    taken.record(history, mode="validation")
    [entry] = recorded(history)
    assert describe(entry) == [
        "nemo_rl: grpo.max_rollout_turns = 2 (scenario: the harness's)",
        "nemo_rl: policy.generation.vllm_cfg.async_engine = False (upstream default: grpo.py:992)",
    ]


def test_the_collector_settings_take_only_trainer_dotted_keys() -> None:
    assert CollectorSettings(trainer_config=MappingProxyType(ASKED)).trainer_config["slime.rollout_seed"] == 7
    with pytest.raises(ValueError, match=r"trainer_config keys are 'trainer.dotted.key', got 'rollout_seed'"):
        CollectorSettings(trainer_config=MappingProxyType({"rollout_seed": 7}))
