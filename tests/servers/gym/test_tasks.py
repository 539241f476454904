"""The task family: rows, the calculator, the verifier and one environment step."""

from __future__ import annotations

import json

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.servers.gym import tasks


def test_calculator_row_is_a_nemo_gym_row_with_the_trained_prompt() -> None:
    row = tasks.calculator_row(12, "*", 7, row_index=3)
    assert row["responses_create_params"]["input"] == [{"role": "user", "content": "What is 12 * 7?"}]
    assert row["responses_create_params"]["tools"][0]["name"] == "calculator"
    assert row["agent_ref"]["name"] == "calculator_agent"
    assert (row["_rowidx"], row["expected_answer"]) == (3, "84")


def test_echo_row_prompt_and_answer() -> None:
    row = tasks.echo_row("apple")
    assert row["responses_create_params"]["input"][0]["content"] == "Repeat exactly: apple"
    assert row["expected_answer"] == "apple"
    assert "tools" not in row["responses_create_params"]


@pytest.mark.parametrize(
    ("expression", "value"), [("3 + 4", 7), ("10 - 12", -2), ("9*9", 81), (" 0 * 5 ", 0)]
)
def test_evaluate(expression: str, value: int) -> None:
    assert tasks.evaluate(expression) == value


def test_evaluate_rejects_anything_else_and_says_what_is_valid() -> None:
    with pytest.raises(tasks.TaskError, match=r"two integers and one of \+ - \*"):
        tasks.evaluate("__import__('os')")


def test_bad_rows_are_rejected() -> None:
    with pytest.raises(tasks.TaskError, match=r"0\.\.99"):
        tasks.calculator_row(100, "+", 1)
    with pytest.raises(tasks.TaskError, match="known tasks: calculator, echo"):
        tasks.verify_answer({"task": "chess"}, "e4")


def test_verify_rewards_right_and_not_wrong_answers() -> None:
    row = tasks.calculator_row(3, "+", 4)
    assert tasks.verify_answer(row, "The answer is 7.") == tasks.Verdict(1.0, None, "The answer is 7.")
    assert tasks.verify_answer(row, "The answer is 8.").failure_reason == "wrong_answer"
    assert tasks.verify_answer(row, "seven").failure_reason == "unparsable_answer"
    assert tasks.verify_answer(row, None).failure_reason == "no_answer"
    echo = tasks.echo_row("river")
    assert tasks.verify_answer(echo, "river").reward == 1.0
    assert tasks.verify_answer(echo, "rivers").reward == 0.0


def test_final_text_reads_the_last_assistant_message() -> None:
    response = {
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "first"}]},
            {"type": "function_call", "name": "calculator", "arguments": "{}", "call_id": "c"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "last"}]},
        ]
    }
    assert tasks.final_text(response) == "last"
    assert tasks.final_text({"output": []}) is None


def test_parse_tool_calls_compact_and_spaced() -> None:
    call = {"name": "calculator", "arguments": {"expression": "1 + 2"}}
    compact = json.dumps(call, separators=(",", ":"))
    text = f"<tool_call>{compact}</tool_call><tool_call>{json.dumps(call)}</tool_call>"
    assert tasks.parse_tool_calls(text) == [("calculator", {"expression": "1 + 2"})] * 2
    with pytest.raises(tasks.TaskError, match="not JSON"):
        tasks.parse_tool_calls("<tool_call>{oops</tool_call>")


def test_step_one_answers_a_tool_call_then_judges_the_answer() -> None:
    meta = {"task": "calculator", "expected_answer": "7"}
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "3 + 4"}}</tool_call>'
    log = [{"role": "user", "content": "What is 3 + 4?"}, {"role": "assistant", "content": call}]
    first = tasks.step_one(log, meta)
    assert first["observation"] == {"role": "tool", "content": "7"}
    assert (first["terminated"], first["reward"]) == (False, 0.0)
    log += [first["observation"], {"role": "assistant", "content": "The answer is 7."}]
    second = tasks.step_one(log, meta)
    assert (second["terminated"], second["reward"], second["answer"]) == (True, 1.0, "The answer is 7.")


def test_dataset_rows_keep_the_trained_tool_text_and_prompts() -> None:
    # The chat template renders the tool JSON as written: sorted keys would be a prompt the model never saw.
    path = bundled.fixtures_dir() / "datasets" / "calculator.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 64
    for row in rows[:8]:
        assert json.dumps(row["responses_create_params"]["tools"]) == json.dumps([tasks.CALCULATOR_TOOL])
        a, op, b = row["expression"].split()
        assert row == tasks.calculator_row(int(a), op, int(b), row_index=row["_rowidx"])
