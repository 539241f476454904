"""The scenario model: good files load with their values and lines; mistakes read path:line: field: ..."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_rollout_chaos.errors import ScenarioError
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.scenario import (
    FaultStep,
    Raises,
    RolloutConditions,
    Scenario,
    ScenarioFileError,
    Trigger,
    load_scenario,
    parse_scenario,
    vocabulary,
)
from tests._invariant_names import INTERFACE_NAMES

DATA = Path(__file__).parent / "data"
SHOWN = Path("s.chaos.yaml")

BASE = """\
name: base
description: a base scenario
expect:
  invariants: [accounted]
"""
# A file with no fault step names what must happen for it to test anything (a line of ``expect``).
WITNESS = "  witness: {multi_turn_rows: 1}\n"


def problems(text: str) -> list[str]:
    with pytest.raises(ScenarioFileError) as caught:
        parse_scenario(textwrap.dedent(text), SHOWN)
    assert isinstance(caught.value, ScenarioError)
    assert str(caught.value) == "\n".join(str(problem) for problem in caught.value.problems)
    return [str(problem) for problem in caught.value.problems]


def load(text: str) -> Scenario:
    return parse_scenario(textwrap.dedent(text), SHOWN)


def test_the_oom_example_loads_with_its_values_and_lines() -> None:
    scenario = load_scenario(DATA / "agent_oom.yaml")
    assert scenario.name == "agent-oom-mid-collection"
    assert scenario.summary.startswith("The calculator agent is OOM-killed after two rollouts;")
    assert scenario.tags == ("process", "hard_failure")
    assert scenario.upstream == ("NVIDIA-NeMo/RL#2305",)
    assert scenario.line == 1
    assert scenario.faults == (FaultStep("oom", "calculator_agent", Trigger("after_completed", completed=2)),)
    assert scenario.faults[0].line == 11
    assert scenario.expect.raises == Raises("RuntimeError", "agent")
    assert scenario.expect.rollouts is None
    assert scenario.expect.within_s == 30.0
    assert scenario.workload.total_rollouts == 4


def test_the_validation_example_fills_fixed_targets_and_counts_rollouts() -> None:
    scenario = load_scenario(DATA / "validation_slow_env.yaml")
    assert scenario.workload.mode == "validation"
    assert scenario.workload.style == "native"
    assert scenario.workload.total_rollouts == 12  # 3 rows x 2 tasks x 2 generations
    assert scenario.stack.env_latency_ms_per_item == 5.0
    (step,) = scenario.faults
    assert (step.kind, step.target, step.duration_s, dict(step.params)) == (
        "slow_env",
        "resources",
        2.5,
        {"delay_ms": 100.5},
    )
    assert scenario.expect.rollouts == RolloutConditions(all_completed=True, min_completed=12)


def test_the_nan_example_keeps_only_the_parameters_written() -> None:
    scenario = load_scenario(DATA / "nan_logprobs.yaml")
    (step,) = scenario.faults
    assert step.at == Trigger("on_request", server="model", nth=3)
    assert dict(step.params) == {"shape": "null", "count": 2}
    assert step.describe() == "nan_logprobs(shape='null', count=2) on model on request #3 to model"
    assert scenario.stack.policy.splice_prefix is False
    assert scenario.expect.rollouts == RolloutConditions(aborted_max=1, aborted_rows=(2,))


def test_defaults_of_a_minimal_file() -> None:
    scenario = load(BASE + WITNESS)
    assert scenario.faults == ()
    assert dict(scenario.expect.witness) == {"multi_turn_rows": 1}
    assert dict(scenario.expect.not_judged) == {}
    assert scenario.stack.servers == ("policy", "model", "resources", "agent", "head")
    assert scenario.workload.tasks == ("calculator",)
    assert scenario.expect.within_s == 60.0
    assert scenario.path == SHOWN


def test_unknown_top_level_key_suggests_the_nearest_and_lists_the_valid_ones() -> None:
    assert problems(BASE + WITNESS + "tagz: [x]\n") == [
        "s.chaos.yaml:6: tagz: unknown key; did you mean 'tags'? (valid: name, description, tags, upstream, "
        "stack, workload, faults, expect)"
    ]
    assert problems(BASE + WITNESS + "zzz: [x]\n") == [  # nothing near: the list alone
        "s.chaos.yaml:6: zzz: unknown key (valid: name, description, tags, upstream, stack, workload, "
        "faults, expect)"
    ]


def test_unknown_fault_kind() -> None:
    text = BASE + "faults:\n  - kind: latncy\n    target: agent->model\n"
    (message,) = problems(text)
    assert message.startswith(
        "s.chaos.yaml:6: faults[0].kind: unknown fault kind 'latncy'; did you mean 'latency'? "
        "(valid: latency, "
    )
    assert message.endswith("short_results, slow_env, cancel)")


def test_network_faults_target_links_and_process_faults_target_servers() -> None:
    text = BASE + "faults:\n  - kind: latency\n    target: policy\n  - kind: kill\n    target: agent->model\n"
    assert problems(text) == [
        "s.chaos.yaml:7: faults[0].target: invalid target 'policy' for a latency fault (valid: agent->model, "
        "agent->resources, model->policy, collector->agent, collector->resources; model->policy[i] for one "
        "policy replica)",
        "s.chaos.yaml:9: faults[1].target: invalid target 'agent->model' for a kill fault (valid: policy, "
        "model, resources, agent, head, calculator_agent, echo_agent; policy[i] for one policy replica)",
    ]


def test_unknown_fault_parameter_lists_the_registry_fields() -> None:
    text = BASE + "faults:\n  - kind: latency\n    target: agent->model\n    latency: 5\n"
    assert problems(text) == [
        "s.chaos.yaml:8: faults[0].latency: unknown key for a latency fault; did you mean 'latency_ms'? "
        "(valid: kind, target, at, "
        "duration_s, expect_hits, stream, toxicity, latency_ms, jitter_ms)"
    ]


def test_parameter_bounds_come_from_the_registry() -> None:
    text = (
        BASE + "faults:\n  - kind: latency\n    target: agent->model\n    toxicity: 2\n    latency_ms: -5\n"
    )
    assert problems(text) == [
        "s.chaos.yaml:8: faults[0].toxicity: invalid value 2 (valid: a number >= 0 and <= 1)",
        "s.chaos.yaml:9: faults[0].latency_ms: invalid value -5 (valid: an integer >= 0)",
    ]


def test_parameter_choices_come_from_the_registry() -> None:
    text = BASE + "faults:\n  - kind: nan_logprobs\n    target: model\n    shape: nope\n"
    assert problems(text) == [
        "s.chaos.yaml:8: faults[0].shape: unknown shape 'nope' (valid: nan, null, inf, http_500)"
    ]


def test_negative_durations_and_times() -> None:
    text = (
        BASE
        + "faults:\n  - kind: down\n    target: agent->model\n    duration_s: -1\n    at: {after_s: -2}\n"
    )
    assert problems(text) == [
        "s.chaos.yaml:8: faults[0].duration_s: invalid value -1 (valid: a number > 0)",
        "s.chaos.yaml:9: faults[0].at.after_s: invalid value -2 (valid: a number >= 0)",
    ]


@pytest.mark.parametrize(
    ("trigger", "expected"),
    [
        (
            "soon",
            "s.chaos.yaml:8: faults[0].at: unknown trigger 'soon' (valid: start, after_completed: N, "
            "after_s: T, on_request: {server: NAME, nth: N})",
        ),
        (
            "{after_requests: 2}",
            "s.chaos.yaml:8: faults[0].at.after_requests: unknown trigger; did you mean 'on_request'? "
            "(valid: start, after_completed: N, "
            "after_s: T, on_request: {server: NAME, nth: N})",
        ),
        (
            "{after_s: 1, after_completed: 1}",
            "s.chaos.yaml:8: faults[0].at: a trigger names exactly one kind, got after_s, after_completed "
            "(valid: start, after_completed: N, after_s: T, on_request: {server: NAME, nth: N})",
        ),
        (
            "{on_request: {server: modle}}",
            "s.chaos.yaml:8: faults[0].at.on_request.server: unknown server 'modle'; did you mean 'model'? "
            "(valid: policy, model, "
            "resources, agent, head, calculator_agent, echo_agent)",
        ),
        (
            "{after_completed: 9}",
            "s.chaos.yaml:8: faults[0].at.after_completed: 9 exceeds the workload's 4 rows, so it would "
            "never fire (valid: 1..4; rows = tasks x rows_per_task x generations_per_prompt = 1 x 4 x 1)",
        ),
    ],
)
def test_bad_triggers(trigger: str, expected: str) -> None:
    text = BASE + f"faults:\n  - kind: kill\n    target: policy\n    at: {trigger}\n"
    assert problems(text) == [expected]


def test_wrong_types() -> None:
    text = BASE + WITNESS + "workload:\n  rows_per_task: four\n  tasks: calculator\nstack:\n  agents: true\n"
    assert problems(text) == [
        "s.chaos.yaml:7: workload.rows_per_task: invalid value 'four' (valid: an integer >= 1)",
        "s.chaos.yaml:8: workload.tasks: expected a list, got 'calculator'",
        "s.chaos.yaml:10: stack.agents: invalid value True (valid: an integer >= 1)",
    ]


@pytest.mark.parametrize(
    ("value", "shown"), [("0", "0"), ("5", "5"), ("two", "'two'"), ("1.5", "1.5"), ("true", "True")]
)
def test_collections_outside_one_to_four_is_an_error_at_its_line(value: str, shown: str) -> None:
    text = BASE + WITNESS + f"workload:\n  rows_per_task: 2\n  collections: {value}\n"
    assert problems(text) == [
        f"s.chaos.yaml:8: workload.collections: invalid value {shown} (valid: an integer >= 1 and <= 4)"
    ]


def test_collections_defaults_to_one_and_loads_up_to_four() -> None:
    assert load(BASE + WITNESS).workload.collections == 1
    assert load(BASE + WITNESS + "workload:\n  collections: 4\n").workload.collections == 4


def test_unknown_invariant_and_repeated_one() -> None:
    text = "name: x\ndescription: d\nexpect:\n  invariants: [acounted, bounded, bounded]\n" + WITNESS
    assert problems(text) == [
        "s.chaos.yaml:4: expect.invariants[0]: unknown invariant 'acounted'; did you mean 'accounted'? "
        f"(valid: {', '.join(INTERFACE_NAMES)})",
        "s.chaos.yaml:4: expect.invariants[2]: 'bounded' is listed twice",
    ]


def test_missing_required_keys_point_at_the_mapping() -> None:
    assert problems("tags: [a]\n") == [
        "s.chaos.yaml:1: name: missing required key (test name)",
        "s.chaos.yaml:1: description: missing required key (the real failure this scenario models)",
        "s.chaos.yaml:1: expect: missing required key (what must be true at the end)",
    ]


def test_raises_and_rollouts_exclude_each_other() -> None:
    text = "name: x\ndescription: d\nexpect:\n  raises: {type: E}\n  rollouts: {all_completed: true}\n"
    text += "  invariants: [accounted]\n" + WITNESS
    assert problems(text) == [
        "s.chaos.yaml:5: expect.rollouts: give either raises or rollouts, not both (expect.raises is on "
        "line 4): raises says the collector must fail, rollouts that it must return"
    ]


def test_rollout_counts_are_checked_against_the_workload() -> None:
    text = "name: x\ndescription: d\nexpect:\n  rollouts: {aborted_rows: [1, 4], min_completed: 5}\n"
    text += "  invariants: [accounted]\n" + WITNESS
    assert problems(text) == [
        "s.chaos.yaml:4: expect.rollouts.min_completed: 5 exceeds the workload's 4 rows (valid: 0..4; "
        "rows = tasks x rows_per_task x generations_per_prompt = 1 x 4 x 1)",
        "s.chaos.yaml:4: expect.rollouts.aborted_rows[1]: row 4 does not exist: the workload has 4 rows "
        "(valid: 0..3; rows = tasks x rows_per_task x generations_per_prompt = 1 x 4 x 1)",
    ]


def test_targets_must_be_started_and_used() -> None:
    text = BASE + "stack: {servers: [policy, model, agent]}\nfaults:\n"
    text += "  - {kind: kill, target: resources}\n  - {kind: down, target: agent->resources}\n"
    text += "  - {kind: freeze, target: echo_agent}\n"
    assert problems(text) == [
        "s.chaos.yaml:7: faults[0].target: 'resources' is not in stack.servers (valid: policy, model, agent)",
        "s.chaos.yaml:8: faults[1].target: 'resources' is not in stack.servers (valid: policy, model, agent)",
        "s.chaos.yaml:9: faults[2].target: no task of the workload uses 'echo_agent'",
    ]


def test_fixed_target_kinds_default_and_refuse_others() -> None:
    scenario = load(BASE + "faults:\n  - kind: short_results\n")
    assert scenario.faults[0].target == "gym_client"
    assert problems(BASE + "faults:\n  - {kind: slow_env, target: model}\n") == [
        "s.chaos.yaml:6: faults[0].target: invalid target 'model' for a slow_env fault (valid: resources)"
    ]


def test_names_tags_and_regexes() -> None:
    text = "name: Bad Name\ndescription: ''\ntags: [and, Network]\n"
    text += "expect:\n  raises: {type: E, match: '(unclosed'}\n  invariants: [accounted]\n" + WITNESS
    assert problems(text) == [
        "s.chaos.yaml:1: name: invalid value 'Bad Name' (valid: lowercase letters, digits, - and _)",
        "s.chaos.yaml:2: description: expected a non-empty string, got '' (valid: a non-empty string)",
        "s.chaos.yaml:3: tags[0]: invalid value 'and' (valid: a marker name: lowercase identifier)",
        "s.chaos.yaml:3: tags[1]: invalid value 'Network' (valid: a marker name: lowercase identifier)",
        "s.chaos.yaml:5: expect.raises.match: invalid regular expression '(unclosed': missing ), "
        "unterminated subpattern at position 0",
    ]


def test_yaml_level_problems() -> None:
    assert problems("") == [
        "s.chaos.yaml:1: (top level): the file is empty (valid keys: name, description, tags, upstream, "
        "stack, workload, faults, expect)"
    ]
    assert problems("- a list\n") == ["s.chaos.yaml:1: (top level): expected a mapping, got a list"]
    assert problems(BASE + WITNESS + "name: again\n") == ["s.chaos.yaml:6: name: key given twice"]
    assert problems("name: x\n---\nname: y\n") == [
        "s.chaos.yaml:2: (yaml): not valid YAML: expected a single document in the stream, but found another "
        "document"
    ]
    assert problems("name: [x\n") == [
        "s.chaos.yaml:1: (yaml): not valid YAML: the '[' at line 1, column 7 is never closed (noticed at "
        "the end of the file: expected ',' or ']', but got '<stream end>')"
    ]
    assert problems("name: 'x\ndescription: d\n") == [
        "s.chaos.yaml:1: (yaml): not valid YAML: the quote ' at line 1, column 7 is never closed (noticed "
        "at the end of the file: found unexpected end of stream)"
    ]
    assert problems("tags: {a: 1\nname: x\n") == [
        "s.chaos.yaml:1: (yaml): not valid YAML: the '{' at line 1, column 7 is never closed (noticed at "
        "line 2, column 5: expected ',' or '}', but got ':')"
    ]
    assert problems(BASE + WITNESS + "1: x\n") == ["s.chaos.yaml:6: (top level): keys must be names, got '1'"]


def test_an_unclosed_bracket_is_reported_where_it_opens_not_where_the_parser_gave_up(tmp_path: Path) -> None:
    """A catalog file whose ``tags:`` list, moved to line 28 of 31, lost its ``]``: the parser only
    notices at the end of the file, but the line to fix is 28."""
    catalog = (Path(__file__).parents[2] / "scenarios" / "baseline.chaos.yaml").read_text().splitlines()
    body = [line for line in catalog if not line.startswith("tags:")]
    lines = [*body, *["# a note"] * (27 - len(body)), "tags: [baseline, slow", *["# more notes"] * 3]
    broken = tmp_path / "broken.chaos.yaml"
    broken.write_text("\n".join(lines) + "\n")
    assert len(lines) == 31
    with pytest.raises(ScenarioFileError) as caught:
        load_scenario(broken)
    assert [str(problem) for problem in caught.value.problems] == [
        f"{broken}:28: (yaml): not valid YAML: the '[' at line 28, column 7 is never closed (noticed at "
        "the end of the file: expected ',' or ']', but got '<stream end>')"
    ]


def test_a_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioFileError, match=r"absent\.chaos\.yaml:1: \(file\): cannot read: "):
        load_scenario(tmp_path / "absent.chaos.yaml")


def test_the_readme_example_is_valid() -> None:
    readme = Path(__file__).parents[2] / "scenarios" / "README.md"
    example = readme.read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    assert load(example) == load_scenario(DATA / "agent_oom.yaml")


def test_fault_targets_and_invariants_are_names_the_format_knows() -> None:
    # Each fault class declares its targets; a fixed one must be a name the format has.
    known = {*vocabulary.SERVERS, *vocabulary.AGENT_INSTANCES, *vocabulary.LINKS}
    known |= {vocabulary.GYM_CLIENT, vocabulary.COLLECTOR}
    for kind in registry.FAULTS:
        assert set(vocabulary.targets_for(kind)) <= known, kind
    assert vocabulary.INVARIANTS == INTERFACE_NAMES


def test_a_step_without_kind_or_target_lists_the_choices() -> None:
    (no_kind,) = problems(BASE + "faults:\n  - target: policy\n")
    assert no_kind.startswith(
        "s.chaos.yaml:6: faults[0].kind: missing required key (valid: latency, bandwidth, "
    )
    assert problems(BASE + "faults:\n  - kind: down\n") == [
        "s.chaos.yaml:6: faults[0].target: missing required key (valid: agent->model, agent->resources, "
        "model->policy, collector->agent, collector->resources; model->policy[i] for one policy replica)"
    ]


def test_on_request_servers_must_be_started_and_used() -> None:
    text = BASE + "stack: {servers: [policy, model, agent]}\nfaults:\n"
    text += "  - {kind: kill, target: policy, at: {on_request: {server: head}}}\n"
    text += "  - {kind: kill, target: policy, at: {on_request: {server: echo_agent, nth: 2}}}\n"
    assert problems(text) == [
        "s.chaos.yaml:7: faults[0].at.on_request.server: 'head' is not in stack.servers (valid: policy, "
        "model, agent)",
        "s.chaos.yaml:8: faults[1].at.on_request.server: no task of the workload uses 'echo_agent'",
    ]


def test_trainer_config_keys_name_a_trainer_and_hold_single_values() -> None:
    scenario = load(
        """\
        name: base
        description: a base scenario
        workload:
          trainer_config:
            nemo_rl.policy.generation.vllm_cfg.async_engine: true
            slime.rollout_seed: 7
            verl.actor_rollout_ref.rollout.temperature: 0.5
            skyrl.generator.skip_failed_rollouts: null
        expect:
          invariants: [accounted]
        """
        + WITNESS
    )
    assert dict(scenario.workload.trainer_config) == {
        "nemo_rl.policy.generation.vllm_cfg.async_engine": True,
        "slime.rollout_seed": 7,
        "verl.actor_rollout_ref.rollout.temperature": 0.5,
        "skyrl.generator.skip_failed_rollouts": None,
    }
    assert dict(load(BASE + WITNESS).workload.trainer_config) == {}


def test_trainer_config_mistakes_name_their_line_and_what_is_valid() -> None:
    valid = "(valid: TRAINER.dotted.key, TRAINER one of nemo_rl, slime, verl, skyrl, nemo_gym)"
    field = "s.chaos.yaml:{line}: workload.trainer_config.{key}: "
    assert problems(
        """\
        name: base
        description: a base scenario
        workload:
          trainer_config:
            openrlhf.rollout.n: 2
            slime: 1
            nemo_rl.policy..top_p: 1.0
            slime.rollout_stop: [a, b]
            verl.actor_rollout_ref.rollout.val_kwargs: {temperature: 0}
        expect:
          invariants: [accounted]
          witness: {multi_turn_rows: 1}
        """
    ) == [
        *(
            field.format(line=line, key=key) + f"invalid setting name {key!r} {valid}"
            for line, key in ((5, "openrlhf.rollout.n"), (6, "slime"), (7, "nemo_rl.policy..top_p"))
        ),
        field.format(line=8, key="slime.rollout_stop") + "expected a single value, got a list",
        field.format(line=9, key="verl.actor_rollout_ref.rollout.val_kwargs")
        + "expected a single value, got a mapping",
    ]
    assert problems(
        """\
        name: base
        description: a base scenario
        workload:
          trainer_config: [nemo_rl.x]
        expect:
          invariants: [accounted]
          witness: {multi_turn_rows: 1}
        """
    ) == ["s.chaos.yaml:4: workload.trainer_config: expected a mapping, got a list"]
