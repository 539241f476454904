"""Policy replicas in the format: ``policy[i]`` and ``model->policy[i]`` targets, ``stack.policy.replicas``,
and an index beyond the replicas the scenario runs as an error at its line naming the valid ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_rollout_chaos.scenario import ScenarioFileError, parse_scenario
from pytest_rollout_chaos.scenario.schema import scenario_schema

SHOWN = Path("s.chaos.yaml")


def text(faults: str, *, stack: str = "") -> str:
    """A file: line 3 is ``stack`` (or a blank line), the fault steps start on line 5."""
    return f"name: x\ndescription: d\n{stack}\nfaults:\n{faults}\nexpect:\n  invariants: [accounted]\n"


def problems(source: str, *, policy_replicas: int = 1) -> list[str]:
    with pytest.raises(ScenarioFileError) as caught:
        parse_scenario(source, SHOWN, policy_replicas=policy_replicas)
    return [str(problem) for problem in caught.value.problems]


KILL_1 = "  - {kind: kill, target: 'policy[1]'}"
LATENCY_1 = "  - {kind: latency, target: 'model->policy[1]', latency_ms: 5}"


def test_a_scenario_asks_for_its_replicas_and_may_then_name_each() -> None:
    scenario = parse_scenario(text(f"{KILL_1}\n{LATENCY_1}", stack="stack: {policy: {replicas: 2}}"), SHOWN)
    assert scenario.stack.policy.replicas == 2
    assert [step.target for step in scenario.faults] == ["policy[1]", "model->policy[1]"]


def test_without_its_own_count_the_runs_count_decides() -> None:
    assert parse_scenario(text(KILL_1), SHOWN, policy_replicas=2).stack.policy.replicas is None
    assert problems(text(KILL_1)) == [
        "s.chaos.yaml:5: faults[0].target: 'policy[1]' is not a replica the stack runs: it runs 1 policy "
        "replica(s) (--rollout-chaos-policy-replicas, or stack.policy.replicas) (valid: policy, policy[0])"
    ]


def test_an_index_beyond_the_scenarios_own_count_is_an_error_whatever_the_run_starts() -> None:
    source = text(LATENCY_1.replace("[1]", "[2]"), stack="stack: {policy: {replicas: 2}}")
    assert problems(source, policy_replicas=4) == [
        "s.chaos.yaml:5: faults[0].target: 'policy[2]' is not a replica the stack runs: it runs 2 policy "
        "replica(s) (--rollout-chaos-policy-replicas, or stack.policy.replicas) (valid: policy, policy[0], "
        "policy[1])"
    ]


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("  - {kind: kill, target: 'model[1]'}", "invalid target 'model[1]' for a kill fault"),
        ("  - {kind: latency, target: 'agent->model[0]', latency_ms: 5}", "invalid target 'agent->model[0]'"),
        ("  - {kind: kill, target: 'policy[x]'}", "invalid target 'policy[x]' for a kill fault"),
    ],
)
def test_only_the_policy_takes_an_index(step: str, expected: str) -> None:
    [problem] = problems(text(step), policy_replicas=2)
    assert expected in problem
    assert "policy[i] for one policy replica" in problem or "model->policy[i] for one" in problem


def test_zero_replicas_is_refused_at_its_key() -> None:
    [problem] = problems(text("  - {kind: kill, target: policy}", stack="stack: {policy: {replicas: 0}}"))
    assert problem.startswith("s.chaos.yaml:3: stack.policy.replicas: invalid value 0")


def test_the_json_schema_accepts_the_replica_targets() -> None:
    schema = scenario_schema()
    kinds = schema["properties"]["faults"]["items"]["oneOf"]
    [kill] = [kind for kind in kinds if kind["properties"]["kind"].get("const") == "kill"]
    pattern = kill["properties"]["target"]["anyOf"][1]["pattern"]
    assert re.fullmatch(pattern, "policy[3]")
    assert not re.fullmatch(pattern, "model[3]")
