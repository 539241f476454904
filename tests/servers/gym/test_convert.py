"""Responses <-> chat conversion, checked against the Responses-API pydantic model NeMo Gym builds on."""

from __future__ import annotations

import pytest
from openai.types.responses import Response

from pytest_rollout_chaos.servers.gym import convert

TOKENS = {"prompt_token_ids": [1, 2], "generation_token_ids": [3, 4], "generation_log_probs": [-0.1, -0.2]}


def test_one_model_call_folds_into_one_assistant_message_carrying_its_tokens() -> None:
    items = [
        {"role": "user", "content": "What is 3 + 4?"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me see."}]},
        {
            "type": "function_call",
            "name": "calculator",
            "arguments": '{"expression": "3 + 4"}',
            "call_id": "c1",
            **TOKENS,
        },
        {"type": "function_call_output", "call_id": "c1", "output": "7"},
    ]
    messages = convert.input_to_messages(items)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assistant = messages[1]
    assert assistant["content"] == "Let me see."
    assert assistant["tool_calls"][0]["function"] == {
        "name": "calculator",
        "arguments": '{"expression": "3 + 4"}',
    }
    assert assistant["generation_token_ids"] == [3, 4]
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "7"}
    assert convert.last_model_prefix(messages) == (1, [1, 2, 3, 4])
    assert "generation_token_ids" not in convert.strip_token_fields(messages)[1]


def test_token_fields_end_a_model_call() -> None:
    first = {"type": "message", "role": "assistant", "content": "a", **TOKENS}
    second = {"type": "message", "role": "assistant", "content": "b", **TOKENS}
    assert len(convert.input_to_messages([first, second])) == 2


def test_unknown_items_are_errors_that_list_the_valid_types() -> None:
    with pytest.raises(convert.ConversionError, match=r"input\[0\] has type 'image'.*function_call_output"):
        convert.input_to_messages([{"type": "image"}])


def test_output_items_put_tokens_on_the_last_item_only() -> None:
    generation = convert.Generation("thinking", [("calculator", "{}")], [1], [2], [-0.5], "tool_calls")
    items = convert.output_items(generation)
    assert [item["type"] for item in items] == ["message", "function_call"]
    assert "generation_token_ids" not in items[0]
    assert items[1]["generation_token_ids"] == [2]


def test_response_object_validates_as_a_responses_api_response() -> None:
    generation = convert.Generation("The answer is 7.", [], [1, 2], [3], [-0.1], "stop")
    params = {"input": "x", "tools": [], "temperature": 0.0}
    body = convert.response_object(
        params, "tiny", convert.output_items(generation), incomplete=False, input_tokens=2, output_tokens=1
    )
    parsed = Response.model_validate(body)
    assert parsed.output[0].type == "message"
    assert parsed.output[0].model_extra == {
        "prompt_token_ids": [1, 2],
        "generation_token_ids": [3],
        "generation_log_probs": [-0.1],
    }
    incomplete = convert.response_object(
        params, "tiny", convert.output_items(None), incomplete=True, input_tokens=0, output_tokens=0
    )
    assert Response.model_validate(incomplete).incomplete_details is not None
    assert "generation_token_ids" not in incomplete["output"][0]


def test_tools_convert_to_chat_shape_in_the_trained_key_order() -> None:
    tool = {
        "type": "function",
        "name": "calculator",
        "description": "d",
        "parameters": {"type": "object"},
        "strict": False,
    }
    assert convert.tools_to_chat([tool]) == [
        {
            "type": "function",
            "function": {"name": "calculator", "description": "d", "parameters": {"type": "object"}},
        }
    ]
    with pytest.raises(convert.ConversionError, match="only function tools"):
        convert.tools_to_chat([{"type": "web_search"}])
