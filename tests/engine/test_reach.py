"""Which fault steps reach a collector that declares ``reaches``: one policy replica counts as the policy."""

from __future__ import annotations

from pytest_rollout_chaos.engine.reach import unreachable
from pytest_rollout_chaos.scenario.model import FaultStep

REACH = {"policy": ("/v1/completions",), "calculator_agent": None}


def test_a_replica_of_a_reached_policy_is_reached_on_the_routes_it_declares() -> None:
    hits = FaultStep("http_error", "policy[1]", params={"route": "/v1/completions"})
    assert unreachable(hits, REACH) is None
    misses = FaultStep("http_error", "policy[0]", params={"route": "/tokenize"})
    assert unreachable(misses, REACH) == (
        "it acts on 'policy[0]' route /tokenize, which the collector never requests there"
    )


def test_a_target_the_collector_never_calls_stays_unreached() -> None:
    assert unreachable(FaultStep("kill", "gym_model"), REACH) == "it acts on 'gym_model'"
