"""The tiny model's chat template renders a tool the same whatever its JSON key order.

NeMo Gym's ``vllm_model`` sends chat tools as ``{"function": {...}, "type": "function"}``; the
embedded model server and vLLM's own request models put ``type`` first. The template renders
each tool in one canonical order, so the model sees (and calls tools from) the prompt it was
trained on either way. No NeMo Gym needed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.servers.gym.convert import tools_to_chat
from pytest_rollout_chaos.servers.gym.tasks import CALCULATOR_TOOL
from pytest_rollout_chaos.servers.policy.chat import CHAT_TEMPLATE, ChatTemplate

TEMPLATE = ChatTemplate(CHAT_TEMPLATE)
MESSAGES = [{"role": "user", "content": "What is 2 + 3?"}]
[CHAT_TOOL] = tools_to_chat([CALCULATOR_TOOL])


def _reordered(tool: dict[str, Any]) -> dict[str, Any]:
    """The tool as vllm_model sends it: ``function`` first, its own keys in reverse order."""
    function = dict(reversed(list(tool["function"].items())))
    return {"function": function, "type": tool["type"]}


def test_the_fixture_template_is_the_generators_template() -> None:
    config = json.loads((bundled.tiny_model_dir() / "tokenizer_config.json").read_text())
    assert config["chat_template"] == CHAT_TEMPLATE, "copy chat.CHAT_TEMPLATE into tokenizer_config.json"


def test_key_order_does_not_change_the_prompt() -> None:
    trained = TEMPLATE.render(MESSAGES, tools=[CHAT_TOOL])
    assert TEMPLATE.render(MESSAGES, tools=[_reordered(CHAT_TOOL)]) == trained
    assert "Tools:\n" + json.dumps(CHAT_TOOL) + "\n" in trained, "type-first order is what the model knows"


@pytest.mark.parametrize(
    ("tool", "rendered"),
    [
        (
            {"parameters": {}, "name": "f", "description": None, "strict": True, "type": "function"},
            '{"type": "function", "function": {"name": "f", "parameters": {}}}',
        ),
        (
            {"function": {"name": "f", "extra": 1}, "type": "function"},
            '{"type": "function", "function": {"name": "f"}}',
        ),
    ],
    ids=["flat, null description and unknown keys", "nested, unknown key"],
)
def test_flat_tools_and_unknown_keys_render_canonically(tool: dict[str, Any], rendered: str) -> None:
    assert "Tools:\n" + rendered + "\n" in TEMPLATE.render(MESSAGES, tools=[tool])
