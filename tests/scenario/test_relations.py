"""Rules between parts of a file: checked in the same pass as the fields, each at the line of its key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_rollout_chaos.scenario import ScenarioFileError, parse_scenario
from pytest_rollout_chaos.scenario.shape import Shape
from tests._invariant_names import INTERFACE_NAMES
from tests.scenario._broken import MANY, RETRY, ROWS_2, many_problems

SHOWN = Path("s.chaos.yaml")


def problems(text: str) -> list[str]:
    with pytest.raises(ScenarioFileError) as caught:
        parse_scenario(textwrap.dedent(text), SHOWN)
    return [str(problem) for problem in caught.value.problems]


def scenario(
    faults: str = "", *, workload: str = "  rows_per_task: 2\n", expect: str = "", witness: str | None = None
) -> str:
    """A file; with no fault step it names a witness last (``witness`` replaces that line's value)."""
    text = f"name: x\ndescription: d\nworkload:\n{workload}"
    if faults:
        text += f"faults:\n{faults}"
    text += f"expect:\n{expect}  invariants: [accounted]\n"
    if witness is None and not faults:
        witness = "{multi_turn_rows: 1}"
    return text + (f"  witness: {witness}\n" if witness else "")


def test_one_pass_reports_every_problem_of_the_file() -> None:
    assert problems(MANY) == many_problems("s.chaos.yaml")


def test_next_steps_sound_listed_without_a_next_step_is_an_error_at_the_invariants() -> None:
    text = (
        "name: x\ndescription: d\nexpect:\n  invariants: [next_steps_sound]\n  witness: {rows_answered: 1}\n"
    )
    assert problems(text) == [
        "s.chaos.yaml:4: expect.invariants: next_steps_sound judges the collections after the first, and "
        "workload.collections is 1, so it would judge nothing: set workload.collections (valid: 2..4), or "
        "leave it out"
    ]
    assert parse_scenario(text + "workload: {collections: 2}\n", SHOWN).workload.collections == 2


def test_a_server_left_down_after_the_heal_is_an_error_where_next_steps_run() -> None:
    kill = "  - kind: kill\n    target: calculator_agent\n    restart_on_heal: false\n"
    assert problems(scenario(kill, workload="  rows_per_task: 2\n  collections: 2\n")) == [
        "s.chaos.yaml:9: faults[0].restart_on_heal: false leaves the server down after the heal, and "
        "workload.collections runs the next steps on a healed stack: they would judge the missing "
        "server, not the collector (leave restart_on_heal out, or workload.collections at 1)"
    ]
    assert parse_scenario(scenario(kill), SHOWN).faults[0].params["restart_on_heal"] is False


def test_a_fault_row_beyond_the_workload_is_an_error_at_the_row_key() -> None:
    text = scenario("  - kind: trajectory_exception\n    target: agent\n    row: 7\n")
    assert problems(text) == [
        "s.chaos.yaml:8: faults[0].row: row 7 does not exist: the workload has 2 rows "
        f"(valid: 0..1; {ROWS_2})"
    ]


def test_after_completed_beyond_the_workload_is_an_error_at_its_key() -> None:
    text = scenario("  - kind: kill\n    target: policy\n    at:\n      after_completed: 50\n")
    assert problems(text) == [
        "s.chaos.yaml:9: faults[0].at.after_completed: 50 exceeds the workload's 2 rows, so it would never "
        f"fire (valid: 1..2; {ROWS_2})"
    ]


def test_the_workload_counts_tasks_rows_and_generations() -> None:
    workload = "  rows_per_task: 2\n  generations_per_prompt: 3\n  tasks: [calculator, echo]\n"
    fine = parse_scenario(scenario("  - {kind: hang, target: model, row: 11}\n", workload=workload), SHOWN)
    assert fine.faults[0].params == {"row": 11}
    assert fine.workload.total_rollouts == 12
    text = scenario("  - {kind: hang, target: model, row: 12}\n", workload=workload)
    assert problems(text) == [
        "s.chaos.yaml:8: faults[0].row: row 12 does not exist: the workload has 12 rows (valid: 0..11; "
        "rows = tasks x rows_per_task x generations_per_prompt = 2 x 2 x 3)"
    ]


def test_an_agent_instance_only_receives_its_own_tasks_rows() -> None:
    workload = "  rows_per_task: 2\n  tasks: [calculator, echo]\n"
    text = scenario("  - {kind: hang, target: echo_agent, row: 1}\n", workload=workload)
    assert problems(text) == [
        "s.chaos.yaml:7: faults[0].row: row 1 is a calculator row, so echo_agent never receives it "
        "(valid: 2..3, the echo rows)"
    ]
    loaded = parse_scenario(
        scenario("  - {kind: hang, target: echo_agent, row: 2}\n", workload=workload), SHOWN
    )
    assert loaded.faults[0].target == "echo_agent"


def test_nth_of_run_requests_is_bounded_by_the_rows_an_agent_receives() -> None:
    over = scenario("  - {kind: trajectory_exception, target: agent, nth: 3}\n")
    assert problems(over) == [
        "s.chaos.yaml:6: faults[0].nth: 3 exceeds the 2 /run requests the workload sends to each agent "
        f"instance (one per row), so it would fire only on a retry (valid: 1..2; {RETRY})"
    ]
    # With a row, nth counts that row's attempts; another route or server has no such bound.
    allowed = (
        "  - {kind: trajectory_exception, target: agent, row: 1, nth: 3}\n"
        "  - {kind: http_error, target: agent, route: /aggregate_metrics, nth: 3}\n"
        "  - {kind: nan_logprobs, target: model, nth: 30}\n"
        "  - {kind: kill, target: policy, at: {on_request: {server: model, nth: 30}}}\n"
    )
    assert [step.params.get("nth") for step in parse_scenario(scenario(allowed), SHOWN).faults] == [
        3,
        3,
        30,
        None,
    ]


def test_a_fault_on_agent_counts_each_instances_requests_a_trigger_all_of_them() -> None:
    # Two tasks of 2 rows: each agent instance receives 2 /run requests, the agents together 4.
    workload = "  rows_per_task: 2\n  tasks: [calculator, echo]\n"
    text = scenario("  - {kind: trajectory_exception, target: agent, nth: 3}\n", workload=workload)
    assert problems(text) == [
        "s.chaos.yaml:7: faults[0].nth: 3 exceeds the 2 /run requests the workload sends to each agent "
        f"instance (one per row), so it would fire only on a retry (valid: 1..2; {RETRY})"
    ]
    trigger = scenario(
        "  - {kind: kill, target: policy, at: {on_request: {server: agent, nth: 4}}}\n", workload=workload
    )
    assert parse_scenario(trigger, SHOWN).faults[0].at.nth == 4
    assert problems(trigger.replace("nth: 4", "nth: 5")) == [
        "s.chaos.yaml:7: faults[0].at.on_request.nth: 5 exceeds the 4 /run requests the workload sends to "
        "'agent' (one per row), so it would fire only on a retry (valid: 1..4)"
    ]


def test_native_style_sends_no_run_request_to_agents() -> None:
    workload = "  rows_per_task: 2\n  style: native\n"
    text = scenario(
        "  - {kind: kill, target: policy, at: {on_request: {server: agent}}}\n", workload=workload
    )
    assert problems(text) == [
        "s.chaos.yaml:7: faults[0].at.on_request.nth: the workload sends no /run request to 'agent': style "
        "native collects without agents, so this never fires"
    ]


def test_short_results_cannot_drop_more_results_than_rows() -> None:
    assert problems(scenario("  - {kind: short_results, count: 3}\n")) == [
        "s.chaos.yaml:6: faults[0].count: 3 exceeds the workload's 2 rows: no more results than rows can go "
        f"missing (valid: 1..2; {ROWS_2})"
    ]
    assert parse_scenario(scenario("  - {kind: short_results, count: 2}\n"), SHOWN).faults[0].params == {
        "count": 2
    }


@pytest.mark.parametrize(
    ("rollouts", "expected"),
    [
        (
            "    all_completed: true\n    aborted_rows: [1]\n",
            "s.chaos.yaml:8: expect.rollouts.aborted_rows: rows [1] cannot end aborted when all_completed is "
            "true (line 7); keep one of the two",
        ),
        (
            "    aborted_rows: [0, 1]\n    aborted_max: 1\n",
            "s.chaos.yaml:8: expect.rollouts.aborted_max: 1 is below the 2 rows that aborted_rows (line 7) "
            "says end aborted (valid: >= 2)",
        ),
        (
            "    aborted_rows: [1]\n    min_completed: 4\n",
            "s.chaos.yaml:8: expect.rollouts.min_completed: 4 cannot be met: aborted_rows (line 7) "
            "leaves 3 of the workload's 4 rows to complete (valid: 0..3)",
        ),
    ],
    ids=["all-completed-vs-aborted-rows", "aborted-max-vs-aborted-rows", "min-completed-vs-aborted-rows"],
)
def test_expectations_that_no_outcome_can_meet(rollouts: str, expected: str) -> None:
    assert problems(scenario(workload="  rows_per_task: 4\n", expect=f"  rollouts:\n{rollouts}")) == [
        expected
    ]


def test_raises_and_rollouts_are_reported_at_the_later_key() -> None:
    text = scenario(expect="  rollouts: {min_completed: 1}\n  raises: {type: E}\n")
    assert problems(text) == [
        "s.chaos.yaml:7: expect.raises: give either raises or rollouts, not both (expect.rollouts is on "
        "line 6): raises says the collector must fail, rollouts that it must return"
    ]


def test_cross_field_problems_do_not_wait_for_the_field_problems() -> None:
    text = scenario("  - {kind: kill, target: policy, at: {after_completed: 3}, duration_s: -1}\n")
    text = text.replace("name: x", "name: Bad Name")
    assert problems(text) == [
        "s.chaos.yaml:1: name: invalid value 'Bad Name' (valid: lowercase letters, digits, - and _)",
        "s.chaos.yaml:6: faults[0].duration_s: invalid value -1 (valid: a number > 0)",
        "s.chaos.yaml:6: faults[0].at.after_completed: 3 exceeds the workload's 2 rows, so it would never "
        f"fire (valid: 1..2; {ROWS_2})",
    ]


def test_a_rule_whose_inputs_are_wrong_is_skipped() -> None:
    # The workload's size is unknown, so row 7 cannot be judged: only the size's own problem shows.
    text = scenario("  - {kind: hang, target: model, row: 7}\n", workload="  rows_per_task: two\n")
    assert problems(text) == [
        "s.chaos.yaml:4: workload.rows_per_task: invalid value 'two' (valid: an integer >= 1)"
    ]
    # A workload that is not a mapping at all does not fall back to the default size.
    text = scenario("  - {kind: hang, target: model, row: 7}\n", workload="  - rows_per_task: 2\n")
    assert problems(text) == ["s.chaos.yaml:4: workload: expected a mapping, got a list"]
    # A repeated key leaves its value in doubt.
    text = scenario(
        "  - {kind: hang, target: model, row: 7}\n", workload="  rows_per_task: 2\n  rows_per_task: 9\n"
    )
    assert problems(text) == ["s.chaos.yaml:5: workload.rows_per_task: key given twice"]


def test_a_row_is_judged_even_when_the_target_is_wrong() -> None:
    assert problems(scenario("  - {kind: hang, target: modle, row: 2}\n")) == [
        "s.chaos.yaml:6: faults[0].target: invalid target 'modle' for a hang fault (valid: policy, model, "
        "resources, agent, head, calculator_agent, echo_agent; policy[i] for one policy replica)",
        "s.chaos.yaml:6: faults[0].row: row 2 does not exist: the workload has 2 rows "
        f"(valid: 0..1; {ROWS_2})",
    ]


def test_a_kind_given_twice_leaves_the_target_and_parameters_unjudged() -> None:
    text = scenario("  - kind: latency\n    kind: kill\n    target: policy\n    at: {after_completed: 3}\n")
    assert problems(text) == [
        "s.chaos.yaml:7: faults[0].kind: key given twice",
        "s.chaos.yaml:9: faults[0].at.after_completed: 3 exceeds the workload's 2 rows, so it would never "
        f"fire (valid: 1..2; {ROWS_2})",
    ]


def test_a_step_with_an_unknown_kind_still_has_its_trigger_checked() -> None:
    text = scenario("  - {kind: latncy, target: agent->model, at: {after_completed: 9}}\n")
    (kind, trigger) = problems(text)
    assert kind.startswith("s.chaos.yaml:6: faults[0].kind: unknown fault kind 'latncy'")
    assert trigger.startswith("s.chaos.yaml:6: faults[0].at.after_completed: 9 exceeds the workload's 2 rows")


def test_the_shape_lays_rows_out_task_by_task() -> None:
    shape = Shape(("calculator", "echo"), 2, 3, "gym", ("policy", "agent"))
    assert shape.total == 12
    assert shape.rows_of("calculator_agent") == range(0, 6)
    assert shape.rows_of("echo_agent") == range(6, 12)
    assert shape.rows_of("model") == range(12)
    assert (shape.runs_to("agent"), shape.runs_to("echo_agent"), shape.runs_to("model")) == (12, 6, None)
    assert (shape.runs_per_fault("agent"), shape.runs_per_fault("echo_agent")) == (6, 6)
    assert [shape.task_of(row) for row in (0, 5, 6, 11, 12)] == [
        "calculator",
        "calculator",
        "echo",
        "echo",
        None,
    ]
    assert Shape.for_rows(4, ("calculator", "echo")).rows_of("echo_agent") == range(2, 4)
    with pytest.raises(
        ValueError, match=r"5 rows cannot be spread evenly over the tasks \['calculator', 'echo'\]"
    ):
        Shape.for_rows(5, ("calculator", "echo"))


def test_a_scenario_with_no_fault_step_must_name_a_witness() -> None:
    assert problems(scenario(witness="")) == [
        "s.chaos.yaml:5: expect.witness: a scenario with no fault step must name what has to happen for it "
        "to test anything (valid: rows_answered, prompt_ids_drifted, multi_turn_rows, task_groups_stepped, "
        "policy_refused_at_start, generations_at_token_limit; e.g. witness: {multi_turn_rows: 1})"
    ]
    drift = parse_scenario(scenario(witness="{prompt_ids_drifted: 2}"), SHOWN)
    assert dict(drift.expect.witness) == {"prompt_ids_drifted": 2}
    with_a_fault = parse_scenario(scenario("  - {kind: kill, target: policy}\n"), SHOWN)
    assert dict(with_a_fault.expect.witness) == {}


def test_witness_names_counts_and_what_the_workload_can_show() -> None:
    assert problems(scenario(witness="{prompt_ids_drift: 1, multi_turn_rows: 0}")) == [
        "s.chaos.yaml:7: expect.witness.prompt_ids_drift: unknown witness 'prompt_ids_drift'; "
        "did you mean 'prompt_ids_drifted'? (valid: "
        "rows_answered, prompt_ids_drifted, multi_turn_rows, task_groups_stepped, policy_refused_at_start, "
        "generations_at_token_limit)",
        "s.chaos.yaml:7: expect.witness.multi_turn_rows: invalid value 0 (valid: an integer >= 1)",
    ]
    assert problems(scenario(witness="{}")) == [
        "s.chaos.yaml:7: expect.witness: expected at least 1 witness name(s), got 0 (valid: "
        "rows_answered, prompt_ids_drifted, multi_turn_rows, task_groups_stepped, policy_refused_at_start, "
        "generations_at_token_limit)"
    ]
    assert problems(scenario(witness="{multi_turn_rows: 3}")) == [
        "s.chaos.yaml:7: expect.witness.multi_turn_rows: 3 exceeds the workload's 2 rows "
        f"(valid: 1..2; {ROWS_2})"
    ]
    native = "  rows_per_task: 2\n  style: native\n"
    assert problems(scenario(workload=native, witness="{prompt_ids_drifted: 1, task_groups_stepped: 2}")) == [
        "s.chaos.yaml:8: expect.witness.prompt_ids_drifted: never seen in native style: drift is read from "
        "/run answers, and native style sends none",
        "s.chaos.yaml:8: expect.witness.task_groups_stepped: 2 exceeds the workload's 1 task groups "
        "(valid: 1..1; workload.tasks)",
    ]
    assert problems(scenario(witness="{task_groups_stepped: 1}")) == [
        "s.chaos.yaml:7: expect.witness.task_groups_stepped: never seen in gym style: the agents step the "
        "environment per row; only native style batches it"
    ]


def test_not_judged_names_a_listed_invariant_with_a_reason() -> None:
    fine = parse_scenario(scenario(expect="  not_judged: {accounted: nothing is requested here}\n"), SHOWN)
    assert dict(fine.expect.not_judged) == {"accounted": "nothing is requested here"}
    text = scenario(expect="  not_judged:\n    bounded: why\n    accountd: x\n    accounted: ''\n")
    assert problems(text) == [
        "s.chaos.yaml:7: expect.not_judged.bounded: bounded is not in expect.invariants (line 10): an "
        "invariant the scenario does not list is not judged silently already; list it, or remove it here",
        "s.chaos.yaml:8: expect.not_judged.accountd: unknown invariant 'accountd'; did you mean 'accounted'? "
        f"(valid: {', '.join(INTERFACE_NAMES)})",
        "s.chaos.yaml:9: expect.not_judged.accounted: expected the reason, got '' (valid: the reason)",
    ]


def test_a_fault_on_one_row_needs_the_default_row_layout() -> None:
    faults = "  - {kind: nan_logprobs, target: agent, row: 1}\n"
    laid_out = "  rows_per_task: 2\n  row_ids: sparse\n  order: interleaved\n"
    assert problems(scenario(faults, workload=laid_out)) == [
        "s.chaos.yaml:8: faults[0].row: a fault on one row needs the default row layout (workload.row_ids: "
        "positions, order: by_task), not sparse/interleaved: aim it at every row (leave row out) or at "
        "a server"
    ]
    parse_scenario(textwrap.dedent(scenario(faults)), SHOWN)  # the default layout takes it
