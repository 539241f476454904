"""The Gym model server's client of its policy: one model call's generation, as ``vllm_model`` gets it.

The chat path (``/v1/chat/completions``, then ``/tokenize`` for the prompt ids) and the spliced
path (``/v1/completions`` from the earlier call's exact ids, ``tokens.splice_prefix``); the
requests under them, to the replica the call was given (``POLICY_URL``), their answers read and
the policy's errors named; what the server keeps to make them (``ModelConfig``, ``ModelState``).
It stands apart from ``model_server``, the HTTP side (routes, per-test controls, the Responses
answer), because this is the part that speaks the policy's API.
"""

from __future__ import annotations

import contextvars
import dataclasses
import itertools
import json
from dataclasses import dataclass
from typing import Any, Final

import aiohttp

from pytest_rollout_chaos import tokens
from pytest_rollout_chaos.history import EventWriter
from pytest_rollout_chaos.servers.gym import convert, tasks
from pytest_rollout_chaos.servers.gym.base import InnerServerError

_CONTEXT_LENGTH_MARKERS: Final = ("context length", "max_tokens", "maximum context")
TOKEN_ID_PREFIX: Final = "token_id:"


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """How this model server talks to its policy."""

    policy_urls: tuple[str, ...]  # one per policy replica
    model: str
    eos_token_id: int | None
    splice: bool = True
    default_max_tokens: int = 64
    request_timeout_s: float = 60.0


@dataclass(slots=True)
class ModelState:
    config: ModelConfig
    writer: EventWriter
    session: aiohttp.ClientSession | None = None
    splice: bool = True  # switchable per test (``/_gym/splice``); ``/_gym/reset`` restores the config's
    replicas: int = 0  # how many of the policy URLs are in use (``/_gym/replicas``); 0: all
    calls: itertools.count[int] = dataclasses.field(default_factory=itertools.count)
    extra_body: dict[str, Any] = dataclasses.field(default_factory=dict)  # ``/_gym/extra_body``

    def next_policy_url(self) -> str:
        """The policy replica the next model call goes to: round robin over those in use."""
        in_use = self.config.policy_urls[: self.replicas or None]
        return in_use[next(self.calls) % len(in_use)]


# The replica the current model call (one ``/v1/responses`` request, one task) talks to.
POLICY_URL: Final = contextvars.ContextVar[str]("policy_url")


class ContextLengthExceeded(Exception):
    """The policy refused the prompt as too long (HTTP 400 naming the context length)."""


async def chat(
    state: ModelState,
    params: dict[str, Any],
    messages: list[dict[str, Any]],
    chat_tools: list[dict[str, Any]],
) -> convert.Generation:
    """Vanilla path: chat completion, then ``/tokenize`` for the prompt ids (NeMo Gym 0.4.0)."""
    payload: dict[str, Any] = state.extra_body | {
        "model": state.config.model,
        "messages": messages,
        "logprobs": True,
        "top_logprobs": 0,
        "return_tokens_as_token_ids": True,
        **_sampling(state.config, params),
    }
    if chat_tools:
        payload["tools"] = chat_tools
    completion = await _post(state, "/v1/chat/completions", payload)
    choice = _first_choice(completion)
    message = choice.get("message") or {}
    logprob_items = ((choice.get("logprobs") or {}).get("content")) or []
    if not logprob_items:
        raise RuntimeError(
            "the policy returned no per-token logprobs although the request asked for them "
            f"(choices[0].logprobs = {choice.get('logprobs')!r})"
        )
    generation_ids = [_token_id(item.get("token")) for item in logprob_items]
    log_probs = [item.get("logprob") for item in logprob_items]
    prompt_ids = await _tokenize(
        state, convert.strip_token_fields(messages), chat_tools, generation_prompt=True
    )
    tool_calls = [
        (str(call["function"]["name"]), str(call["function"].get("arguments", "{}")))
        for call in message.get("tool_calls") or []
    ]
    return convert.Generation(
        content=str(message.get("content") or ""),
        tool_calls=tool_calls,
        prompt_token_ids=prompt_ids,
        generation_token_ids=generation_ids,
        generation_log_probs=log_probs,  # kept as sent: NaN/None faults pass through
        finish_reason=str(choice.get("finish_reason") or "stop"),
        reasoning=message.get("reasoning_content") or message.get("reasoning"),
    )


async def spliced(
    state: ModelState,
    params: dict[str, Any],
    messages: list[dict[str, Any]],
    chat_tools: list[dict[str, Any]],
    *,
    prefix_index: int,
    model_prefix: list[int],
) -> convert.Generation:
    """Splice path: keep the earlier call's exact tokens, generate from token ids."""
    plain = convert.strip_token_fields(messages)
    template_ids = await _tokenize(state, plain, chat_tools, generation_prompt=True)
    template_prefix = await _tokenize(state, plain[: prefix_index + 1], chat_tools, generation_prompt=False)
    assert state.config.eos_token_id is not None  # model_server.build_app refuses splicing without it
    prompt_ids = tokens.splice_prefix(model_prefix, template_prefix, template_ids, state.config.eos_token_id)
    payload = state.extra_body | {
        "model": state.config.model,
        "prompt": prompt_ids,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,
        **_sampling(state.config, params),
    }
    completion = await _post(state, "/v1/completions", payload)
    choice = _first_choice(completion)
    logprobs = choice.get("logprobs") or {}
    token_texts = logprobs.get("tokens") or []
    if not token_texts:
        raise RuntimeError(
            "the policy returned no per-token logprobs for a token-id prompt "
            f"(choices[0].logprobs = {logprobs!r})"
        )
    text = str(choice.get("text") or "")
    calls: list[tuple[str, str]] = []
    content = text
    if chat_tools:  # like vLLM: tool calls are parsed only when the request offers tools
        try:
            calls = [(name, json.dumps(arguments)) for name, arguments in tasks.parse_tool_calls(text)]
            content = tasks.text_without_tool_calls(text) if calls else text
        except (tasks.TaskError, ValueError):
            calls, content = [], text  # an unparsable call stays text, as vLLM's Hermes parser does
    return convert.Generation(
        content=content,
        tool_calls=calls,
        prompt_token_ids=prompt_ids,
        generation_token_ids=[_token_id(token) for token in token_texts],
        generation_log_probs=list(logprobs.get("token_logprobs") or []),
        finish_reason=str(choice.get("finish_reason") or "stop"),
    )


def _sampling(config: ModelConfig, params: dict[str, Any]) -> dict[str, Any]:
    sampling: dict[str, Any] = {"max_tokens": params.get("max_output_tokens") or config.default_max_tokens}
    for key in ("temperature", "top_p"):
        if params.get(key) is not None:
            sampling[key] = params[key]
    return sampling


async def _tokenize(
    state: ModelState,
    messages: list[dict[str, Any]],
    chat_tools: list[dict[str, Any]],
    *,
    generation_prompt: bool,
) -> list[int]:
    payload: dict[str, Any] = {
        "model": state.config.model,
        "messages": messages,
        "add_generation_prompt": generation_prompt,
    }
    if chat_tools:
        payload["tools"] = chat_tools
    result = await _post(state, "/tokenize", payload)
    ids = result.get("tokens")
    if not isinstance(ids, list):
        raise TypeError(f"policy /tokenize answered without a 'tokens' list: {str(result)[:300]}")
    return [int(token) for token in ids]


async def _post(state: ModelState, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    if state.session is None:
        state.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=state.config.request_timeout_s),
            headers={"Authorization": "Bearer dummy-key"},
        )
    url = POLICY_URL.get(state.config.policy_urls[0]).rstrip("/") + path
    try:
        async with state.session.post(url, json=payload) as response:
            text = await response.text()
            status = response.status
    except TimeoutError as error:
        raise InnerServerError(
            "policy", url, None, f"no answer within {state.config.request_timeout_s} s"
        ) from error
    except aiohttp.ClientError as error:
        raise InnerServerError("policy", url, None, f"{type(error).__name__}: {error}") from error
    if status == 400 and any(marker in text.lower() for marker in _CONTEXT_LENGTH_MARKERS):
        raise ContextLengthExceeded(text)
    if status >= 300:
        raise InnerServerError("policy", url, status, text[:500])
    try:
        body = json.loads(text)
    except ValueError as error:
        raise InnerServerError("policy", url, status, f"malformed JSON ({error}): {text[:200]!r}") from error
    if not isinstance(body, dict):
        raise InnerServerError("policy", url, status, f"expected a JSON object, got {text[:200]!r}")
    return body


def _first_choice(completion: dict[str, Any]) -> dict[str, Any]:
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise RuntimeError(f"policy completion has no choices: {str(completion)[:300]}")
    return choices[0]


def _token_id(token: Any) -> int:
    text = str(token)
    if not text.startswith(TOKEN_ID_PREFIX):
        raise RuntimeError(
            f"expected tokens as {TOKEN_ID_PREFIX}<int> (return_tokens_as_token_ids), got {text!r}"
        )
    return int(text[len(TOKEN_ID_PREFIX) :])
