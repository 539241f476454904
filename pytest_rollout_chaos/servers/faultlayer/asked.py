"""What a collector's request asks for: its sampling parameters and its prompt, as recorded.

A retry must ask for what the attempt it replaces asked for: the same distribution (temperature,
top_p, the token limit...) over the same prompt (the messages and the tools the chat template
renders). The layer writes it with the ``invoke`` of each ``/run`` and model call a collector
sends for a known row, so a judge can hold a retry against the attempt before it. ``sampling``
holds the parameters found, by name, as sent: at the top of the body (chat and completions
requests), in a ``/run``'s ``responses_create_params``, or in a token-in request's
``sampling_params`` (the first place that has a name wins). A seed is not among them: it picks a
draw from the distribution, not the distribution, and a retry that re-draws with a new seed is
still faithful. ``prompt`` holds a digest per part of the prompt (``<items>:<16 hex digits>``,
order of keys aside), a fixed size whatever its length; ``sent_ids``, for a token-in request
of one prompt, its token ids as the History records token ids (``history.fingerprint``), so a
judge can hold a turn's prompt to them; ``turn`` the assistant messages the prompt holds, which
tells a native collector's retry of a turn from its next turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from pytest_rollout_chaos.history import fingerprint

SAMPLING_KEYS: Final = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_output_tokens",
    "max_tokens",
    "max_completion_tokens",
    "max_new_tokens",
    "min_tokens",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "logit_bias",
    "tool_choice",
    "parallel_tool_calls",
)
# part name -> the keys that may hold it (a /run's under responses_create_params)
PROMPT_PARTS: Final = {
    "instructions": ("instructions",),
    "input": ("input",),
    "messages": ("messages",),
    "prompt": ("prompt",),
    "token_ids": ("token_ids", "input_ids", "prompt_token_ids"),
    "tools": ("tools",),
}
PARAMS_KEYS: Final = ("responses_create_params", "sampling_params")
_SCALAR_ITEMS: Final = 16  # a list of scalars up to this long (a stop list) is recorded as it is
_MISSING: Final = object()


def asked(document: Any) -> dict[str, Any]:
    """``sampling``, ``prompt`` and ``turn`` of a request's JSON body; {} for a body that is no object."""
    if not isinstance(document, Mapping):
        return {}
    places = [document, *(document[key] for key in PARAMS_KEYS if isinstance(document.get(key), Mapping))]
    sampling: dict[str, Any] = {}
    for name in SAMPLING_KEYS:
        found = next((place[name] for place in places if name in place), _MISSING)
        if found is not _MISSING:
            sampling[name] = _recorded(found)
    prompt: dict[str, str] = {}
    for part, keys in PROMPT_PARTS.items():
        found = next((place[key] for key in keys for place in places if key in place), _MISSING)
        if found is not _MISSING:
            prompt[part] = digest(found)
    facts: dict[str, Any] = {"sampling": sampling, "prompt": prompt}
    ids = next((place[key] for key in PROMPT_PARTS["token_ids"] for place in places if key in place), None)
    if isinstance(ids, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in ids):
        facts["sent_ids"] = fingerprint(ids)
    messages = document.get("messages")
    if isinstance(messages, list):
        roles = [item.get("role") for item in messages if isinstance(item, Mapping)]
        facts["turn"] = roles.count("assistant")
    return facts


def digest(value: Any) -> str:
    """``"<items>:<16 hex digits>"`` of a JSON value: its length (items of a list or object,
    characters of a string, else 1) and a hash of it with its keys sorted."""
    size = len(value) if isinstance(value, list | dict | str) else 1
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
    return f"{size}:{hashlib.blake2b(text.encode(), digest_size=8).hexdigest()}"


def _recorded(value: Any) -> Any:
    """A parameter as recorded: a scalar or a short list of scalars as sent, else its digest."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if (
        isinstance(value, list)
        and len(value) <= _SCALAR_ITEMS
        and all(item is None or isinstance(item, str | int | float | bool) for item in value)
    ):
        return value
    return digest(value)
