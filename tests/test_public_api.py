"""The front door: ``from pytest_rollout_chaos import ...`` gives every public name, importing it
starts nothing and loads no heavy module, and the deep imports are the same objects."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import pytest_rollout_chaos
from pytest_rollout_chaos.collector import protocol
from pytest_rollout_chaos.collector.environment import EnvironmentReturn
from pytest_rollout_chaos.collector.gym_client import GymRequestError
from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.settings import ChaosSettings

HEAVY = ("pytest", "aiohttp", "yaml", "torch", "numpy", "tokenizers", "docker")


def test_every_name_in_all_resolves() -> None:
    missing = [name for name in pytest_rollout_chaos.__all__ if not hasattr(pytest_rollout_chaos, name)]
    assert missing == []
    assert set(pytest_rollout_chaos.__all__) <= set(dir(pytest_rollout_chaos))


def test_front_door_names_are_the_deep_ones() -> None:
    from pytest_rollout_chaos import CollectorContext, Rollout, Turn

    front = pytest_rollout_chaos
    assert (Rollout, Turn, CollectorContext) == (protocol.Rollout, protocol.Turn, protocol.CollectorContext)
    assert (front.History, front.ChaosSettings) == (History, ChaosSettings)
    assert (front.EnvironmentReturn, front.GymRequestError) == (EnvironmentReturn, GymRequestError)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Rollouts'"):
        _ = pytest_rollout_chaos.Rollouts


def test_importing_the_package_loads_no_heavy_module() -> None:
    code = (
        "import json, sys\n"
        "import pytest_rollout_chaos\n"
        "from pytest_rollout_chaos import Rollout, Turn, CollectorContext, Collector, History\n"
        f"print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(output) == []


class _GymOnly:
    styles = ("gym",)


class _BadStyles:
    styles = "gym"


def test_supported_styles_reads_the_declaration_or_defaults_to_both() -> None:
    assert protocol.supported_styles(_GymOnly()) == ("gym",)
    assert protocol.supported_styles(_GymOnly) == ("gym",)
    assert protocol.supported_styles(object()) == ("gym", "native")
    with pytest.raises(CollectorTargetError, match=r"_BadStyles.styles is 'gym'; valid: a tuple of"):
        protocol.supported_styles(_BadStyles())


class _ValidationOnly:
    modes = ("validation",)


class _BadModes:
    modes = ("eval",)


def test_supported_modes_reads_the_declaration_or_defaults_to_both() -> None:
    assert protocol.supported_modes(_ValidationOnly()) == ("validation",)
    assert protocol.supported_modes(object()) == ("train", "validation")
    with pytest.raises(
        CollectorTargetError,
        match=r"_BadModes.modes is \('eval',\); valid: a tuple of 'train', 'validation', such as modes",
    ):
        protocol.supported_modes(_BadModes)
