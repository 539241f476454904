"""How many policy replicas the builder starts: the option's count, or more where a scenario to run
asks for more and the embedded model server can narrow them per scenario."""

from __future__ import annotations

from pathlib import Path

from pytest_rollout_chaos.builder import replicas_to_start
from pytest_rollout_chaos.scenario.model import parse_scenario
from pytest_rollout_chaos.settings import ChaosSettings


def _scenario(replicas: int | None) -> object:
    stack = f"stack: {{policy: {{replicas: {replicas}}}}}\n" if replicas else ""
    scenario = parse_scenario(
        f"name: x\ndescription: d\n{stack}faults:\n  - {{kind: kill, target: policy}}\n"
        "expect:\n  invariants: [accounted]\n",
        Path("x.chaos.yaml"),
    )
    return scenario


def _items(*replicas: int | None) -> list[object]:
    return [_scenario(count) for count in replicas]


def test_the_option_decides_unless_a_scenario_asks_for_more() -> None:
    assert replicas_to_start(ChaosSettings(), _items(None)) == 1
    assert replicas_to_start(ChaosSettings(policy_replicas=3), _items(None, 2)) == 3
    assert replicas_to_start(ChaosSettings(), _items(None, 2, 1)) == 2


def test_real_nemo_gym_takes_the_options_count_alone() -> None:
    assert replicas_to_start(ChaosSettings(gym="nemo-gym"), _items(2)) == 1
