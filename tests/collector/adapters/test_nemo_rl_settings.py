"""The ``nemo_rl`` adapter gives NeMo RL its own defaults, read against the pinned trees' source.

Every setting the adapter hands NeMo RL, in train mode (the ``NemoGym`` actor's config and NaN
retries, the caller's generation config) and in validation mode (``validate()``'s master config),
is either upstream's default, as the tree's code has it, or a key of upstream's own config types
that the run fixes; only ``workload.trainer_config`` changes one. Nothing of the trainer is imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos.collector.adapters import (
    nemo_rl_settings,
    nemo_rl_step_3eebe4da,
    nemo_rl_step_7ea279ab,
)
from pytest_rollout_chaos.collector.adapters.trainer_settings import Setting, TrainerSettings
from pytest_rollout_chaos.collector.protocol import CollectorContext
from pytest_rollout_chaos.errors import CollectorTargetError
from tests.collector.adapters._settings_context import settings_context
from tests.collector.adapters._trees import pinned_tree
from tests.collector.adapters._upstream_defaults import code_defaults, config_keys, get_default

OLDER = ("nemo-rl-3eebe4da", "nemo-rl-964b609a", "nemo-rl-3069f281", "nemo-rl-c6a661e8")
"""The trees before NeMo RL #3000: the NaN-retry knob, ``nemo_rl_step_3eebe4da``."""
MAIN = "nemo-rl-7ea279ab"
TREES = (*OLDER, MAIN)


@pytest.fixture(scope="module", params=TREES)
def tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pinned_tree(request.param, tmp_path_factory.mktemp("nemo-rl"), needs=(), holds="nemo_rl")


def both_modes(ctx: CollectorContext, tree: Path) -> list[TrainerSettings]:
    """The settings of both modes as the adapter takes them for ``tree``."""
    step = nemo_rl_step_7ea279ab if tree.name == MAIN else nemo_rl_step_3eebe4da
    validation, _ = nemo_rl_settings.validation(ctx, rows=8, max_model_len=2048, pad_token_id=0)
    train = nemo_rl_settings.train(ctx, 2048, nan_retry_knob=tree.name != MAIN)
    # grpo_train past the rollout, as that tree's copy reads it
    nemo_rl_settings.train_step(train, prompts=8, generations=1, rows=step.SETTINGS, where=step.WHERE)
    return [train, validation]


def departures(settings: list[Setting], tree: Path) -> list[str]:
    """Settings that are neither upstream's default (as the tree's code has it) nor a key of
    upstream's config types that the run fixes."""
    defaults = code_defaults(tree, "nemo_rl")
    keys = config_keys(tree, "nemo_rl")
    wrong = []
    for item in settings:
        leaf = item.key.rpartition(".")[2]
        if item.source == "upstream default" and item.value not in defaults.get(leaf, []):
            wrong.append(f"{item.key} = {item.value!r}: upstream's defaults are {defaults.get(leaf)}")
        elif item.source == "run" and leaf not in keys:
            wrong.append(f"{item.key}: no config type of NeMo RL declares {leaf!r}")
        elif item.source not in ("upstream default", "run"):
            wrong.append(f"{item.key} = {item.value!r} from {item.source} though the scenario asked nothing")
    return wrong


def test_no_setting_differs_from_upstreams_default_unless_the_scenario_asked(tree: Path) -> None:
    for taken in both_modes(settings_context(), tree):
        assert departures(taken.items, tree) == []


def test_nan_retries_are_upstreams_default_of_one_where_the_actor_has_the_knob(tree: Path) -> None:
    found = get_default(tree / "nemo_rl/environments/nemo_gym.py", "rollout_max_attempts_to_avoid_lp_nan")
    if tree.name == MAIN:  # NeMo RL #3000 removed it: a NaN logprob fails the batch at once
        assert found == []
        taken = nemo_rl_settings.train(settings_context(), 2048, nan_retry_knob=False)
        assert nemo_rl_settings.nan_retries(taken) is None
        assert nemo_rl_settings.NAN_RETRIES not in [item.key for item in taken.items]
        return
    [default] = found
    assert default == 1
    assert nemo_rl_settings.nan_retries(nemo_rl_settings.train(settings_context(), 2048)) == default


def test_validation_takes_the_path_validate_takes_by_default(tree: Path) -> None:
    [default] = set(get_default(tree / "nemo_rl/algorithms/grpo.py", "async_engine"))
    _, config = nemo_rl_settings.validation(settings_context(), rows=8, max_model_len=2048, pad_token_id=0)
    assert config["policy"]["generation"]["vllm_cfg"]["async_engine"] is default is False
    assert nemo_rl_settings.variant(config) == "sync"


def test_the_async_engine_variant_is_the_scenarios_choice() -> None:
    ctx = settings_context(
        **{"nemo_rl.policy.generation.vllm_cfg.async_engine": True, "slime.rollout_seed": 7}
    )
    taken, config = nemo_rl_settings.validation(ctx, rows=8, max_model_len=2048, pad_token_id=0)
    assert nemo_rl_settings.variant(config) == "async_engine"
    asked = [item for item in taken.items if item.source == "scenario"]
    assert asked == [
        Setting(nemo_rl_settings.ASYNC_ENGINE, True, "scenario", nemo_rl_settings.WHERE_ASYNC_ENGINE)
    ]


def test_a_scenario_may_raise_the_nan_retries() -> None:
    taken = nemo_rl_settings.train(settings_context(**{f"nemo_rl.{nemo_rl_settings.NAN_RETRIES}": 3}), 2048)
    assert nemo_rl_settings.nan_retries(taken) == 3
    assert nemo_rl_settings.actor_cfg(taken) == {
        "model_name": "tiny",
        "base_urls": ["http://127.0.0.1:1/v1"],
        "initial_global_config_dict": {},
    }


def test_a_key_the_adapter_does_not_hand_nemo_rl_is_an_error_naming_the_valid_ones() -> None:
    with pytest.raises(
        CollectorTargetError, match=r"no setting nemo_rl\.policy\.generation\.vllm_cfg\.asnyc_engine"
    ) as raised:
        nemo_rl_settings.settings(
            settings_context(**{"nemo_rl.policy.generation.vllm_cfg.asnyc_engine": True})
        )
    assert "nemo_rl.policy.generation.vllm_cfg.async_engine" in str(raised.value)


def test_the_settings_are_recorded_for_the_report() -> None:
    ctx = settings_context()
    nemo_rl_settings.train(ctx, 2048).record(ctx.history, mode="train")
    [event] = ctx.history.events(op="trainer_settings")
    assert event.data["trainer"] == "nemo_rl"
    assert event.data["mode"] == "train"
    retries = next(item for item in event.data["settings"] if item["key"] == nemo_rl_settings.NAN_RETRIES)
    assert retries == {
        "key": nemo_rl_settings.NAN_RETRIES,
        "value": 1,
        "source": "upstream default",
        "where": nemo_rl_settings.WHERE_NAN_RETRIES,
    }
