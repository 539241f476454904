"""The chat side of the tokenizer: render messages with the model's Jinja template, parse tool calls.

The template lives in ``tokenizer_config.json`` (``chat_template``), as in every HF model, and is
rendered in an environment set up as ``transformers`` sets up its own (sandboxed, ``trim_blocks``,
``lstrip_blocks``, a ``tojson`` that keeps key order and non-ASCII), so that our ``/tokenize``
and ``vllm serve`` produce the same prompt. Tool calls are Hermes-style
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` spans in the assistant's text; the
parser turns them into OpenAI ``tool_calls`` and re-serialises the arguments with ``json.dumps``
(as vLLM's hermes parser does), which is one real source of retokenization drift.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

TOOL_CALL_START: Final = "<tool_call>"
TOOL_CALL_END: Final = "</tool_call>"
_TOOL_CALL_RE: Final = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

# ChatML turns; tools announced in the system turn; Hermes tool calls; tool results as role "tool".
# Each tool is rendered in one canonical key order (type, function: name, description, parameters;
# other keys dropped), whatever order the client's JSON had: NeMo Gym's vllm_model sends
# ``{"function": ..., "type": "function"}`` where vLLM's own request models dump type first, and
# the same tools must give the same prompt either way.
CHAT_TEMPLATE: Final = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n' }}{%- endif %}"
    "{{- 'Tools:\\n' }}"
    "{%- for tool in tools %}"
    "{%- set function = tool.function if tool.function is defined else tool %}"
    "{{- '{\"type\": ' + (tool.type if tool.type is defined else 'function') | tojson }}"
    "{{- ', \"function\": {' }}"
    "{%- for key in ['name', 'description', 'parameters']"
    " if function[key] is defined and function[key] is not none %}"
    "{{- (', ' if not loop.first else '') + key | tojson + ': ' + function[key] | tojson }}"
    "{%- endfor %}"
    "{{- '}}\\n' }}"
    "{%- endfor %}"
    '{{- \'Call a tool with <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>\\n\' }}'
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}{%- if not loop.first %}"
    "{{- raise_exception('a system message is only allowed first') }}{%- endif %}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- for call in message.tool_calls or [] %}"
    "{%- set function = call.function if call.function is defined else call %}"
    "{{- '<tool_call>{\"name\": ' + function.name | tojson + ', \"arguments\": ' }}"
    "{%- if function.arguments is string %}{{- function.arguments }}"
    "{%- else %}{{- function.arguments | tojson }}{%- endif %}"
    "{{- '}</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


class TemplateError(ValueError):
    """The messages cannot be rendered (the template raised, or a message is malformed)."""


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise(message: str) -> None:
    raise TemplateError(message)


class ChatTemplate:
    """One compiled chat template."""

    def __init__(self, source: str) -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        self._template = env.from_string(source)

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The prompt text; arguments given as JSON strings are parsed first, as vLLM does."""
        if not messages:
            raise TemplateError("messages: at least one message is required")
        prepared = [_prepare(index, message) for index, message in enumerate(messages)]
        try:
            return self._template.render(
                messages=prepared,
                tools=list(tools) if tools else None,
                add_generation_prompt=add_generation_prompt,
            )
        except TemplateError:
            raise
        except Exception as error:
            raise TemplateError(f"chat template failed: {type(error).__name__}: {error}") from error


def _prepare(index: int, message: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(message, Mapping) or "role" not in message:
        raise TemplateError(f"messages[{index}]: expected an object with a 'role'")
    prepared = dict(message)
    content = prepared.get("content")
    if isinstance(content, list):  # OpenAI content parts: keep the text ones
        prepared["content"] = "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    calls = prepared.get("tool_calls")
    if calls:
        fixed = []
        for call in calls:
            function = dict(call.get("function") or {})
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                with contextlib.suppress(ValueError):  # else rendered verbatim, as the model wrote it
                    function["arguments"] = json.loads(arguments)
            fixed.append({**call, "function": function})
        prepared["tool_calls"] = fixed
    return prepared


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """Assistant text split into free content and tool calls (OpenAI shapes)."""

    content: str | None
    tool_calls: list[dict[str, Any]]


def parse_tool_calls(text: str) -> ParsedOutput:
    """Split ``text`` into content before the first tool call and the parsed calls.

    Like vLLM's hermes parser: if any call is not valid JSON with a ``name``, the whole text
    stays content and there are no tool calls.
    """
    if TOOL_CALL_START not in text:
        return ParsedOutput(content=text, tool_calls=[])
    calls: list[dict[str, Any]] = []
    for match in _TOOL_CALL_RE.finditer(text):
        try:
            payload = json.loads(match.group(1))
        except ValueError:
            return ParsedOutput(content=text, tool_calls=[])
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            return ParsedOutput(content=text, tool_calls=[])
        calls.append(
            {
                "id": f"chatcmpl-tool-{uuid.uuid4().hex}",
                "type": "function",
                "function": {
                    "name": payload["name"],
                    "arguments": json.dumps(payload.get("arguments", {}), ensure_ascii=False),
                },
            }
        )
    if not calls:
        return ParsedOutput(content=text, tool_calls=[])
    before = text[: text.index(TOOL_CALL_START)]
    return ParsedOutput(content=before if before.strip() else None, tool_calls=calls)
