"""The collector's settings follow from the scenario: here, the stop strings its stack asks for."""

from __future__ import annotations

from pytest_rollout_chaos.engine.workload import collector_settings
from pytest_rollout_chaos.scenario.model import load_scenario
from tests.catalog._verdicts import CATALOG


def test_the_scenarios_stop_strings_reach_the_collectors_settings() -> None:
    """A collector that generates itself sets them in its own sampling parameters (``sets_stop``)."""
    stopping = collector_settings(load_scenario(CATALOG / "turn-ends-at-tool-call.chaos.yaml"))
    assert stopping.stop == ("</tool_call>",)
    assert collector_settings(load_scenario(CATALOG / "baseline.chaos.yaml")).stop == ()
