"""How many policy replicas the session starts: the option's count, or more where a collected
scenario asks for more and the embedded model server can narrow them per scenario."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_rollout_chaos.fixtures import replicas_to_start
from pytest_rollout_chaos.scenario.model import parse_scenario
from pytest_rollout_chaos.settings import ChaosSettings


def _item(replicas: int | None) -> Any:
    stack = f"stack: {{policy: {{replicas: {replicas}}}}}\n" if replicas else ""
    scenario = parse_scenario(
        f"name: x\ndescription: d\n{stack}faults:\n  - {{kind: kill, target: policy}}\n"
        "expect:\n  invariants: [accounted]\n",
        Path("x.chaos.yaml"),
    )
    return SimpleNamespace(scenario=scenario)


def _items(*replicas: int | None) -> list[pytest.Item]:
    plain_test = SimpleNamespace()  # a Python test has no scenario
    return cast(list[pytest.Item], [plain_test, *(_item(count) for count in replicas)])


def test_the_option_decides_unless_a_scenario_asks_for_more() -> None:
    assert replicas_to_start(ChaosSettings(), _items(None)) == 1
    assert replicas_to_start(ChaosSettings(policy_replicas=3), _items(None, 2)) == 3
    assert replicas_to_start(ChaosSettings(), _items(None, 2, 1)) == 2


def test_real_nemo_gym_takes_the_options_count_alone() -> None:
    assert replicas_to_start(ChaosSettings(gym="nemo-gym"), _items(2)) == 1
