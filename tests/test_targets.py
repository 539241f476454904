"""The one list of built-in targets: every adapter module is in it, everything that names targets
reads it, and a name added to it is loadable, valid and offered everywhere at once."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType

import pytest

from pytest_rollout_chaos import options, plugin, settings, targets
from pytest_rollout_chaos.collector import adapters
from pytest_rollout_chaos.collector.adapters import gym_client
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.collector.target import load_factory
from pytest_rollout_chaos.gate import command
from pytest_rollout_chaos.scenario import vocabulary


def _adapter_modules() -> set[str]:
    """The modules of ``collector/adapters`` that are adapters: they hold a factory and ``UPSTREAM``."""
    names = set()
    for info in pkgutil.iter_modules(adapters.__path__):
        module = importlib.import_module(f"{adapters.__name__}.{info.name}")
        if callable(getattr(module, "factory", None)) and hasattr(module, "UPSTREAM"):
            names.add(info.name)
    return names


def test_every_adapter_module_is_listed_and_every_listed_adapter_has_a_module() -> None:
    assert _adapter_modules() == set(targets.ADAPTERS)


@pytest.mark.parametrize("name", list(targets.ADAPTERS))
def test_every_adapter_declares_its_upstream_and_gym_client(name: str) -> None:
    module = importlib.import_module(f"{adapters.__name__}.{name}")
    assert isinstance(module.UPSTREAM, Upstream)
    assert module.GYM_CLIENT
    assert gym_client(name) == module.GYM_CLIENT


def test_the_trainers_are_the_adapters_trainers_and_the_scenario_format_reads_them() -> None:
    assert targets.TRAINERS == ("nemo_rl", "slime", "verl", "skyrl", "nemo_gym")
    assert vocabulary.TRAINERS is targets.TRAINERS


def test_each_trainers_interpreter_has_one_variable_and_a_users_collector_none() -> None:
    assert [targets.python_env(name) for name in targets.TRAINERS] == [
        "ROLLOUT_CHAOS_NEMO_RL_PYTHON",
        "ROLLOUT_CHAOS_SLIME_PYTHON",
        "ROLLOUT_CHAOS_VERL_PYTHON",
        "ROLLOUT_CHAOS_SKYRL_PYTHON",
        None,  # nemo_gym: the gate's own interpreter; the collection runs in NeMo Gym's
    ]
    assert targets.python_env("skyrl_skip_failed_rollouts") == "ROLLOUT_CHAOS_SKYRL_PYTHON"
    assert targets.python_env("reference") is None
    assert targets.python_env("my_trainer.chaos:make_collector") is None


def test_the_option_help_the_gate_help_and_the_option_check_name_every_target() -> None:
    help_text = next(text for dest, _, text, *_ in plugin._OPTIONS if dest == settings.OPT_TARGET)
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    gate_help = parser.format_help()
    with pytest.raises(pytest.UsageError) as raised:
        options._validate_target("no-colon", "--rollout-chaos-target")
    for name in targets.BUILTIN:
        assert name in help_text
        assert name in str(raised.value)
        options._validate_target(name, "--rollout-chaos-target")
    for name in targets.ADAPTERS:
        assert name in gate_help


def test_a_name_added_to_the_list_loads_its_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """A throwaway adapter: its module and one entry in ``ADAPTERS`` make it a target."""
    throwaway = ModuleType(f"{adapters.__name__}.throwaway")
    throwaway.UPSTREAM = Upstream(adapter="throwaway", modules=("json",), install="nothing")  # type: ignore[attr-defined]
    throwaway.GYM_CLIENT = "the throwaway's own"  # type: ignore[attr-defined]

    def factory(ctx: object) -> object:
        return ctx

    throwaway.factory = factory  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, throwaway.__name__, throwaway)
    monkeypatch.setattr(targets, "ADAPTERS", {**targets.ADAPTERS, "throwaway": "throwaway"})
    assert load_factory("throwaway") is factory
    assert gym_client("throwaway") == "the throwaway's own"
