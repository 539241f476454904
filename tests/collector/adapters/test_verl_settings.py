"""The ``verl`` adapter gives the recipe's manager verl's own rollout config, read from verl itself.

The manager reads ``actor_rollout_ref.rollout`` of verl's config; every key the adapter gives it
holds the value of verl's ``rollout.yaml`` (the installed verl's, interpolations resolved as verl
resolves them with no ``data`` section), unless the scenario's ``trainer_config`` asks otherwise.
The train step past generation reads ``algorithm``: verl's generated trainer config's values, but
the estimator, GRPO as the recipe's scripts set it.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos.collector.adapters import verl_settings
from pytest_rollout_chaos.errors import CollectorTargetError
from tests.collector.adapters._settings_context import settings_context


def verls_rollout_config() -> Any:
    """verl's own ``rollout.yaml``, resolved (omegaconf and verl must be installed)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or spec.origin is None or importlib.util.find_spec("omegaconf") is None:
        pytest.skip("verl and omegaconf are not installed here (the trainers' venv has them)")
    omegaconf: Any = importlib.import_module("omegaconf")
    return omegaconf.OmegaConf.load(Path(spec.origin).parent / "trainer/config/rollout/rollout.yaml")


def verls_trainer_config() -> Any:
    """verl's own generated PPO trainer config (omegaconf and verl must be installed)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or spec.origin is None or importlib.util.find_spec("omegaconf") is None:
        pytest.skip("verl and omegaconf are not installed here (the trainers' venv has them)")
    omegaconf: Any = importlib.import_module("omegaconf")
    return omegaconf.OmegaConf.load(Path(spec.origin).parent / "trainer/config/_generated_ppo_trainer.yaml")


def test_every_setting_is_verls_own_default_but_the_recipes_estimator() -> None:
    """The rollout keys hold ``rollout.yaml``'s values, the algorithm keys the trainer config's;
    the one the run fixes is GRPO, which verl's default (GAE, with a critic) is not."""
    rollout, trainer = verls_rollout_config(), verls_trainer_config()
    OmegaConf: Any = importlib.import_module("omegaconf").OmegaConf
    wrong = []
    for item in verl_settings.settings(settings_context()).items:
        if item.key == "algorithm.adv_estimator":
            assert (item.value, item.source) == ("grpo", "run")
            assert OmegaConf.select(trainer, item.key) == "gae"
            continue
        upstream, key = (
            (rollout, item.key.removeprefix("actor_rollout_ref.rollout."))
            if item.key.startswith("actor_rollout_ref.rollout.")
            else (trainer, item.key)
        )
        theirs = OmegaConf.to_container(
            OmegaConf.create({"v": OmegaConf.select(upstream, key)}), resolve=True
        )
        if item.source != "upstream default" or theirs["v"] != item.value:
            wrong.append(f"{key} = {item.value!r} ({item.source}); verl's config: {theirs['v']!r}")
    assert wrong == []


def test_the_manager_config_is_the_settings_nested() -> None:
    ctx = settings_context(**{"verl.actor_rollout_ref.rollout.temperature": 0.5})
    taken = verl_settings.settings(ctx)
    rollout = {item.key: item for item in taken.items}["actor_rollout_ref.rollout.temperature"]
    assert (rollout.value, rollout.source) == (0.5, "scenario")


def test_a_key_the_manager_is_not_given_is_an_error() -> None:
    with pytest.raises(CollectorTargetError, match=r"no setting verl\.actor_rollout_ref\.rollout\.n "):
        verl_settings.settings(settings_context(**{"verl.actor_rollout_ref.rollout.n": 4}))


def test_the_group_size_is_verls_default_n_for_one_generation_and_the_workloads_otherwise() -> None:
    upstream = verls_rollout_config()
    single = {item.key: item for item in verl_settings.settings(settings_context()).items}
    assert single["actor_rollout_ref.rollout.n"].value == upstream.n == 1
    assert single["actor_rollout_ref.rollout.n"].source == "upstream default"
    grouped = {item.key: item for item in verl_settings.settings(settings_context(), n=4).items}
    assert (grouped["actor_rollout_ref.rollout.n"].value, grouped["actor_rollout_ref.rollout.n"].source) == (
        4,
        "run",
    )
    validating = {
        item.key: item for item in verl_settings.settings(settings_context(), validate=True, n=4).items
    }
    assert validating["actor_rollout_ref.rollout.val_kwargs.n"].value == 4
    assert upstream.val_kwargs.n == 1
