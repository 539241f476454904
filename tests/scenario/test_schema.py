"""The JSON Schema comes from the validator's tables: it accepts what validate accepts, rejects the rest."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.scenario import ScenarioFileError, parse_scenario, tables
from pytest_rollout_chaos.scenario.schema import scenario_schema
from pytest_rollout_chaos.scenario.template import render

jsonschema = pytest.importorskip("jsonschema")

DATA = Path(__file__).parent / "data"
GOOD_FILES = sorted(DATA.glob("*.yaml"))


@functools.cache
def validator() -> Any:
    schema = scenario_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_is_json_and_a_valid_draft_2020_12_schema() -> None:
    schema = scenario_schema()
    assert json.loads(json.dumps(schema)) == schema
    jsonschema.Draft202012Validator.check_schema(schema)


def schema_errors(data: object) -> list[str]:
    return [error.message for error in validator().iter_errors(data)]


@pytest.mark.parametrize("path", GOOD_FILES, ids=lambda path: path.stem)
def test_good_files_pass_both_the_schema_and_the_validator(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    scenario = parse_scenario(path.read_text(), path)
    assert (scenario.name, scenario.expect.invariants) == (data["name"], tuple(data["expect"]["invariants"]))
    assert [step.kind for step in scenario.faults] == [step["kind"] for step in data.get("faults", [])]
    assert schema_errors(data) == []


def test_the_new_template_passes_the_schema() -> None:
    text = render("from-template")
    assert parse_scenario(text, Path("from-template.chaos.yaml")).name == "from-template"
    assert schema_errors(yaml.safe_load(text)) == []


# Each bad addition and the field the validator names for it (on line 6, where it is added).
BAD = {
    "unknown top-level key": ("tagz: [x]\n", "tagz"),
    "unknown fault kind": ("faults: [{kind: latncy, target: agent->model}]\n", "faults[0].kind"),
    "network fault on a server": ("faults: [{kind: latency, target: policy}]\n", "faults[0].target"),
    "unknown fault parameter": (
        "faults: [{kind: latency, target: agent->model, latency: 5}]\n",
        "faults[0].latency",
    ),
    "parameter above its maximum": (
        "faults: [{kind: latency, target: agent->model, toxicity: 2}]\n",
        "faults[0].toxicity",
    ),
    "negative duration": ("faults: [{kind: kill, target: policy, duration_s: -1}]\n", "faults[0].duration_s"),
    "unknown trigger": ("faults: [{kind: kill, target: policy, at: soon}]\n", "faults[0].at"),
    "two triggers": (
        "faults: [{kind: kill, target: policy, at: {after_s: 1, after_completed: 1}}]\n",
        "faults[0].at",
    ),
    "wrong type": ("workload: {rows_per_task: four}\n", "workload.rows_per_task"),
    "bool for an integer": ("stack: {agents: true}\n", "stack.agents"),
    "bad tag": ("tags: [Network]\n", "tags[0]"),
    "unknown invariant not judged": ("  not_judged: {acounted: why}\n", "expect.not_judged.acounted"),
}
BASE = (
    "name: base\ndescription: a base scenario\nexpect:\n  invariants: [accounted]\n"
    "  witness: {multi_turn_rows: 1}\n"
)


@pytest.mark.parametrize(("extra", "field"), BAD.values(), ids=list(BAD))
def test_bad_files_fail_both_the_schema_and_the_validator(extra: str, field: str) -> None:
    text = BASE + extra
    with pytest.raises(ScenarioFileError) as caught:
        parse_scenario(text, Path("s.chaos.yaml"))
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (6, field)
    assert "valid: " in problem.message
    assert schema_errors(yaml.safe_load(text)) != []


def test_bad_invariant_fails_the_schema() -> None:
    data = yaml.safe_load(BASE)
    data["expect"]["invariants"] = ["acounted"]
    assert not validator().is_valid(data)


def test_witness_and_not_judged_are_in_the_schema() -> None:
    data = yaml.safe_load(BASE)
    data["expect"]["not_judged"] = {"accounted": "nothing is requested here"}
    assert schema_errors(data) == []
    for bad in ({"prompt_ids_drift": 1}, {"multi_turn_rows": 0}, {}):
        assert not validator().is_valid({**data, "expect": {**data["expect"], "witness": bad}}), bad
    assert not validator().is_valid({**data, "expect": {**data["expect"], "not_judged": {"accounted": ""}}})


def test_every_table_key_is_in_the_schema() -> None:
    schema = scenario_schema()
    assert list(schema["properties"]) == [field.name for field in tables.SCENARIO.fields]
    assert list(schema["properties"]["expect"]["properties"]) == [f.name for f in tables.EXPECT.fields]
    assert schema["required"] == ["name", "description", "expect"]


def test_fault_alternatives_follow_the_registry() -> None:
    steps = scenario_schema()["properties"]["faults"]["items"]["oneOf"]
    assert [step["properties"]["kind"]["const"] for step in steps] == list(registry.FAULTS)
    latency = steps[0]["properties"]
    assert latency["latency_ms"]["minimum"] == 0
    assert latency["toxicity"]["maximum"] == 1.0
    assert steps[0]["additionalProperties"] is False


@pytest.mark.parametrize(
    ("trainer_config", "valid"),
    [
        ({"nemo_rl.policy.generation.vllm_cfg.async_engine": True, "slime.rollout_seed": 7}, True),
        ({"skyrl.generator.skip_failed_rollouts": None}, True),
        ({"openrlhf.n": 2}, False),
        ({"slime": 1}, False),
        ({"slime.rollout_stop": ["a"]}, False),
    ],
)
def test_the_schema_and_the_validator_agree_on_trainer_config(
    trainer_config: dict[str, Any], valid: bool
) -> None:
    data = {
        "name": "s",
        "description": "d",
        "workload": {"trainer_config": trainer_config},
        "expect": {"invariants": ["accounted"], "witness": {"multi_turn_rows": 1}},
    }
    assert (schema_errors(data) == []) is valid
    try:
        parse_scenario(yaml.safe_dump(data), Path("s.chaos.yaml"))
    except ScenarioFileError:
        assert not valid
    else:
        assert valid
