"""pytest-rollout-chaos: chaos testing for the rollout collection of LLM RL trainers.

The public API is ``__all__``: what a collector under test is given and returns
(ARCHITECTURE.md#rollout-data and #the-collector-contract), the History it may write to, and
the exceptions. Importing this package has no side effects and stays light (no pytest,
aiohttp, torch): the names whose modules pull in more are loaded on first use, ``__version__``
(read from the installed metadata) included. Deep imports
(``pytest_rollout_chaos.collector.protocol``) keep working.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from pytest_rollout_chaos.collector.protocol import (
    STYLES,
    CollectionError,
    Collector,
    CollectorContext,
    CollectorFactory,
    CollectorSettings,
    EmptyTrainBatchError,
    Environment,
    GymRunner,
    InfrastructureError,
    LossReduction,
    Mode,
    Rollout,
    RolloutStatus,
    Row,
    ShortCountError,
    Style,
    TooManyAbortedError,
    Turn,
    row_index,
    supported_modes,
    supported_styles,
)
from pytest_rollout_chaos.errors import (
    ChaosError,
    CollectorContractError,
    CollectorTargetError,
    FaultError,
    InvariantViolation,
    NotJudgedError,
    ScenarioError,
    ServerCrashedError,
    ServerStartError,
)
from pytest_rollout_chaos.history import Event, History

if TYPE_CHECKING:
    from pytest_rollout_chaos.collector.environment import EnvironmentReturn
    from pytest_rollout_chaos.collector.gym_client import GymRequestError
    from pytest_rollout_chaos.injector import FaultInjector
    from pytest_rollout_chaos.settings import ChaosSettings
    from pytest_rollout_chaos.version import __version__ as __version__

__all__ = [
    "STYLES",
    "ChaosError",
    "ChaosSettings",
    "CollectionError",
    "Collector",
    "CollectorContext",
    "CollectorContractError",
    "CollectorFactory",
    "CollectorSettings",
    "CollectorTargetError",
    "EmptyTrainBatchError",
    "Environment",
    "EnvironmentReturn",
    "Event",
    "FaultError",
    "FaultInjector",
    "GymRequestError",
    "GymRunner",
    "History",
    "InfrastructureError",
    "InvariantViolation",
    "LossReduction",
    "Mode",
    "NotJudgedError",
    "Rollout",
    "RolloutStatus",
    "Row",
    "ScenarioError",
    "ServerCrashedError",
    "ServerStartError",
    "ShortCountError",
    "Style",
    "TooManyAbortedError",
    "Turn",
    "row_index",
    "supported_modes",
    "supported_styles",
]

# Loaded on first use: these modules import pytest, aiohttp or yaml, which a server process or
# a collector module importing ``Rollout`` does not need.
_LAZY: Final = {
    "ChaosSettings": "pytest_rollout_chaos.settings",
    "EnvironmentReturn": "pytest_rollout_chaos.collector.environment",
    "FaultInjector": "pytest_rollout_chaos.injector",
    "GymRequestError": "pytest_rollout_chaos.collector.gym_client",
    "__version__": "pytest_rollout_chaos.version",  # reads package metadata
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
