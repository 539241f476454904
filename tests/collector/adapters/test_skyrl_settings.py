"""The ``skyrl`` adapter starts from ``SkyRLTrainConfig()`` and sets only what the run fixes.

Every field it sets is a field of SkyRL's config (on every pinned tree); the ones whose value
differs from SkyRL's own default are exactly the run's (the policy, its model, the harness's
turn and token limits, the workload's group size and prompts per step), and
``generator.skip_failed_rollouts`` keeps SkyRL's default unless the variant's name or the
scenario asks.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from pytest_rollout_chaos.collector.adapters import skyrl_settings, skyrl_upstream
from pytest_rollout_chaos.errors import CollectorTargetError
from tests.collector.adapters._settings_context import settings_context
from tests.collector.adapters._skyrl_trees import BASE, HEAD, MAIN, importable, unpack

# What the run fixes where SkyRL has a default of its own: the workload's shape and the stack.
RUN_DEPARTURES = {
    "generator.max_turns",
    "generator.n_samples_per_prompt",
    "trainer.train_batch_size",
    "trainer.policy_mini_batch_size",
    "generator.sampling_params.max_generate_length",
    "generator.inference_engine.external_proxy_url",
    "generator.inference_engine.served_model_name",
    "trainer.policy.model.path",
}


@pytest.fixture(params=[BASE, HEAD, MAIN])
def config_class(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with importable(unpack(request.param, tmp_path_factory.mktemp("skyrl"))):
        yield importlib.import_module(skyrl_upstream.CONFIG_MODULE).SkyRLTrainConfig


def value_at(config: Any, key: str) -> Any:
    for part in key.split("."):
        config = getattr(config, part)
    return config


def test_only_the_runs_fields_differ_from_skyrls_defaults(config_class: Any) -> None:
    defaults = config_class()
    taken = skyrl_settings.settings(
        settings_context(), policy_root="http://127.0.0.1:1", model_dir="/models/tiny"
    )
    differ = set()
    for item in taken.items:
        assert item.source == "run", item
        if value_at(defaults, item.key) != item.value:  # an AttributeError: a field SkyRL lacks
            differ.add(item.key)
    assert differ == RUN_DEPARTURES
    assert "generator.skip_failed_rollouts" not in {item.key for item in taken.items}


def test_a_scenario_may_turn_on_skip_failed_rollouts() -> None:
    ctx = settings_context(**{"skyrl.generator.skip_failed_rollouts": True})
    taken = skyrl_settings.settings(ctx, policy_root="http://127.0.0.1:1", model_dir="/m")
    [asked] = [item for item in taken.items if item.source == "scenario"]
    assert (asked.key, asked.value) == ("generator.skip_failed_rollouts", True)


def test_a_scenario_may_set_the_loss_reduction() -> None:
    """What ``train_batch_sound`` weighs an aborted sample in the train batch by."""
    taken = skyrl_settings.settings(
        settings_context(**{"skyrl.trainer.algorithm.loss_reduction": "sequence_mean"}),
        policy_root="http://x",
        model_dir="/m",
    )
    [asked] = [item for item in taken.items if item.source == "scenario"]
    assert (asked.key, asked.value) == ("trainer.algorithm.loss_reduction", "sequence_mean")
    unasked = skyrl_settings.settings(settings_context(), policy_root="http://x", model_dir="/m")
    assert skyrl_settings.LOSS_REDUCTION not in {item.key for item in unasked.items}


def test_a_field_the_adapter_does_not_set_is_an_error() -> None:
    with pytest.raises(CollectorTargetError, match=r"no setting skyrl\.generator\.batched"):
        skyrl_settings.settings(
            settings_context(**{"skyrl.generator.batched": True}), policy_root="http://x", model_dir="/m"
        )


def test_the_group_size_is_the_workloads_and_no_scenario_key() -> None:
    taken = skyrl_settings.settings(
        settings_context(), policy_root="http://x", model_dir="/m", n_samples_per_prompt=4
    )
    [size] = [item for item in taken.items if item.key == skyrl_settings.GROUP_SIZE]
    assert (size.value, size.source) == (4, "run")
    assert "generations_per_prompt" in size.where
    with pytest.raises(CollectorTargetError, match=r"no setting skyrl\.generator\.n_samples_per_prompt"):
        skyrl_settings.settings(
            settings_context(**{"skyrl.generator.n_samples_per_prompt": 2}),
            policy_root="http://x",
            model_dir="/m",
        )


def test_the_scenarios_stop_strings_go_to_skyrls_own_sampling_params(config_class: Any) -> None:
    """``stack.policy.stop`` reaches SkyRL as its ``generator.sampling_params.stop`` (a field of every
    pinned tree, default None), which its generator sends with every generate; without stop strings
    SkyRL's default stays."""
    ctx = settings_context()
    stopping = dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, stop=("</tool_call>",)))
    taken = skyrl_settings.settings(stopping, policy_root="http://x", model_dir="/m")
    [stop] = [item for item in taken.items if item.key == skyrl_settings.STOP]
    assert (stop.value, stop.source) == (["</tool_call>"], "run")
    assert value_at(config_class(), skyrl_settings.STOP) is None
    unset = skyrl_settings.settings(ctx, policy_root="http://x", model_dir="/m")
    assert skyrl_settings.STOP not in {item.key for item in unset.items}


def test_validation_sets_the_eval_fields_as_training_sets_theirs(config_class: Any) -> None:
    """``evaluate`` reads ``eval_n_samples_per_prompt`` and ``eval_sampling_params`` (whose length
    SkyRL's config copies from the training one when it is built, before the adapter sets that),
    and dumps its results under ``trainer.export_path``; every key is a field of each pinned tree."""
    ctx = settings_context()
    stopping = dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, stop=("</tool_call>",)))
    taken = skyrl_settings.settings(
        stopping, policy_root="http://x", model_dir="/m", n_samples_per_prompt=2, eval_folder="/tmp/e"
    )
    given = {item.key: item.value for item in taken.items}
    defaults = config_class()
    for key in (
        skyrl_settings.EVAL_GROUP_SIZE,
        skyrl_settings.EVAL_LENGTH,
        skyrl_settings.EVAL_STOP,
        skyrl_settings.EXPORT_PATH,
    ):
        value_at(defaults, key)  # an AttributeError: a field SkyRL lacks
    assert given[skyrl_settings.EVAL_GROUP_SIZE] == 2
    assert given[skyrl_settings.EVAL_LENGTH] == given["generator.sampling_params.max_generate_length"]
    assert given[skyrl_settings.EVAL_STOP] == ["</tool_call>"]
    assert given[skyrl_settings.EXPORT_PATH] == "/tmp/e"
    assert "generator.eval_sampling_params.temperature" not in given, "SkyRL's eval default, 0"
    training = skyrl_settings.settings(ctx, policy_root="http://x", model_dir="/m")
    evaluation_only = {skyrl_settings.EVAL_LENGTH, skyrl_settings.EXPORT_PATH}
    assert not {item.key for item in training.items} & evaluation_only
