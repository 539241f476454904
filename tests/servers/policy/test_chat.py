"""The chat template and the Hermes tool-call parser, without a server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_rollout_chaos.servers.policy.chat import (
    CHAT_TEMPLATE,
    ChatTemplate,
    TemplateError,
    parse_tool_calls,
)

TEMPLATE = ChatTemplate(CHAT_TEMPLATE)


def test_renders_chatml_with_generation_prompt() -> None:
    text = TEMPLATE.render([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    assert (
        text
        == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_tool_call_arguments_rerender_spaced_whatever_the_model_wrote() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "calculator", "arguments": '{"expression":"1 + 2"}'},
    }
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "What is 1 + 2?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]
    text = TEMPLATE.render(messages, add_generation_prompt=False)
    assert (
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1 + 2"}}</tool_call><|im_end|>'
        in text
    )
    assert text.endswith("<|im_start|>tool\n3<|im_end|>\n")


def test_tools_are_announced_in_the_system_turn() -> None:
    tool = {"type": "function", "function": {"name": "calculator", "parameters": {}}}
    text = TEMPLATE.render([{"role": "user", "content": "x"}], tools=[tool])
    assert text.startswith("<|im_start|>system\nTools:\n" + json.dumps(tool) + "\n")


def test_misplaced_system_message_is_a_clear_error() -> None:
    with pytest.raises(TemplateError, match="system message is only allowed first"):
        TEMPLATE.render([{"role": "user", "content": "x"}, {"role": "system", "content": "y"}])
    with pytest.raises(TemplateError, match=r"messages\[0\]"):
        TEMPLATE.render([{"content": "no role"}])


def test_parses_hermes_tool_calls_and_reserialises_arguments() -> None:
    parsed = parse_tool_calls(
        'Let me see.<tool_call>{"name":"calculator","arguments":{"expression":"1 + 2"}}</tool_call>'
    )
    assert parsed.content == "Let me see."
    assert [call["function"] for call in parsed.tool_calls] == [
        {"name": "calculator", "arguments": '{"expression": "1 + 2"}'}
    ]


@pytest.mark.parametrize(
    "text",
    [
        "no call at all",
        "<tool_call>{not json}</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',
        "<tool_call>",
    ],
)
def test_unparseable_calls_stay_content(text: str) -> None:
    parsed = parse_tool_calls(text)
    assert parsed.content == text
    assert parsed.tool_calls == []
