"""The Gym model server: ``POST /v1/responses`` on top of an OpenAI/vLLM policy server.

It behaves like NeMo Gym's ``vllm_model`` in training mode (``return_token_id_information``):
Responses input is converted to chat messages, the policy generates, and the output items
carry ``prompt_token_ids``, ``generation_token_ids`` and ``generation_log_probs`` on the last
item of the call. Prompt ids come from the policy's ``/tokenize``. ``finish_reason: length``
and a policy 400 about the context length become ``incomplete_details: {reason:
max_output_tokens}`` (the latter with an empty message and no token ids, as NeMo Gym does).

Splicing (on by default, ``--no-splice`` turns it off): when the conversation carries an
earlier call's token ids, the prompt is spliced at the last end-of-turn token
(``tokens.splice_prefix``) and generated from those exact ids through ``/v1/completions``, as
trainers' patched vLLM servers do. Off, every call re-renders the conversation through the
chat template, so retokenization drift happens for real.

Extra sampling fields (``/_gym/extra_body``), as ``vllm_model``'s ``extra_body`` setting: merged
into every generation request until ``/_gym/reset``, the request's own fields winning. A deployment
sets stop strings there (``stop`` with ``include_stop_str_in_output``) to end a turn at its tool
call, as SkyRL's and verl's multi-turn agents do at ``</tool_call>``: such a turn ends without EOS.

Several policy replicas (``--policy-url`` given once per replica) share the calls as NeMo Gym's
``vllm_model`` shares them over its list of base URLs: round robin, here per model call (every
request of one call, ``/tokenize`` and the generation, goes to the same replica). ``/_gym/replicas``
narrows them to the first N until ``/_gym/reset``.

Run as ``python -m pytest_rollout_chaos.servers.gym.model_server --policy-url URL [--policy-url
URL ...] --model NAME --eos-token-id ID [--no-splice]``.
"""

from __future__ import annotations

import argparse
import contextvars
import dataclasses
import itertools
import json
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
from aiohttp import web

from pytest_rollout_chaos import tokens
from pytest_rollout_chaos.history import EventWriter
from pytest_rollout_chaos.servers import serve
from pytest_rollout_chaos.servers.gym import convert, tasks
from pytest_rollout_chaos.servers.gym.base import (
    InnerServerError,
    close_session_on_cleanup,
    gym_app,
    json_object,
)
from pytest_rollout_chaos.servers.loopback import loopback_only

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


STATE_KEY: Final = web.AppKey("model_state", ModelState)
# The replica the current model call (one ``/v1/responses`` request, one task) talks to.
_POLICY_URL: Final = contextvars.ContextVar[str]("policy_url")


class ContextLengthExceeded(Exception):
    """The policy refused the prompt as too long (HTTP 400 naming the context length)."""


def build_app(config: ModelConfig) -> web.Application:
    """The model server app."""
    if config.splice and config.eos_token_id is None:
        raise ValueError("splicing needs the end-of-turn token id (--eos-token-id), or pass --no-splice")
    app, writer = gym_app("model", "model")
    app[STATE_KEY] = ModelState(config, writer, splice=config.splice)
    app.router.add_post("/v1/responses", responses)
    app.router.add_post("/_gym/splice", loopback_only(set_splice))
    app.router.add_post("/_gym/reset", loopback_only(reset))
    app.router.add_post("/_gym/replicas", loopback_only(set_replicas))
    app.router.add_post("/_gym/extra_body", loopback_only(set_extra_body))
    close_session_on_cleanup(app, STATE_KEY)
    return app


async def set_splice(request: web.Request) -> web.Response:
    """``{"enabled": bool}``: splice earlier turns' ids (trainer-patched vLLM) or re-render (vanilla)."""
    state = request.app[STATE_KEY]
    body = await json_object(request)
    enabled = body.get("enabled")
    if not isinstance(enabled, bool):
        raise web.HTTPBadRequest(text=f"enabled: expected true or false, got {enabled!r}")
    if enabled and state.config.eos_token_id is None:
        raise web.HTTPBadRequest(text="splicing needs the end-of-turn token id (--eos-token-id)")
    state.splice = enabled
    return web.json_response({"splice": state.splice})


async def set_replicas(request: web.Request) -> web.Response:
    """``{"count": N}``: spread calls over the first N policy replicas only."""
    state = request.app[STATE_KEY]
    body = await json_object(request)
    count = body.get("count")
    total = len(state.config.policy_urls)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= total:
        raise web.HTTPBadRequest(text=f"count: expected a whole number from 1 to {total}, got {count!r}")
    state.replicas = count
    return web.json_response({"replicas": count})


async def set_extra_body(request: web.Request) -> web.Response:
    """``{"extra_body": {...}}``: fields merged into every generation request (``vllm_model``'s
    ``extra_body``), e.g. stop strings; the request's own fields win."""
    state = request.app[STATE_KEY]
    body = await json_object(request)
    extra = body.get("extra_body")
    if not isinstance(extra, dict):
        raise web.HTTPBadRequest(text=f"extra_body: expected an object, got {extra!r}")
    state.extra_body = dict(extra)
    return web.json_response({"extra_body": state.extra_body})


async def reset(request: web.Request) -> web.Response:
    """Per-test state back to the configuration: splicing as started, every policy replica in use,
    no extra sampling fields."""
    state = request.app[STATE_KEY]
    state.splice = state.config.splice
    state.replicas = 0
    state.extra_body = {}
    return web.json_response({"splice": state.splice, "replicas": len(state.config.policy_urls)})


async def responses(request: web.Request) -> web.Response:
    """One model call in Responses-API terms."""
    params = await json_object(request)
    state = request.app[STATE_KEY]
    _POLICY_URL.set(state.next_policy_url())
    messages = convert.input_to_messages(params.get("input", []))
    chat_tools = convert.tools_to_chat(params.get("tools"))
    spliced = False
    try:
        prefix = convert.last_model_prefix(messages) if state.splice else None
        if prefix is None:
            generation = await _chat(state, params, messages, chat_tools)
        else:
            spliced = True
            generation = await _spliced(
                state, params, messages, chat_tools, prefix_index=prefix[0], model_prefix=prefix[1]
            )
    except ContextLengthExceeded:
        generation = None
    incomplete = generation is None or generation.finish_reason == "length"
    state.writer.emit(
        "info",
        "model_call",
        {
            "spliced": spliced,
            "prompt_len": len(generation.prompt_token_ids) if generation else 0,
            "generation_len": len(generation.generation_token_ids) if generation else 0,
            "incomplete": incomplete,
        },
    )
    body = convert.response_object(
        params,
        state.config.model,
        convert.output_items(generation),
        incomplete=incomplete,
        input_tokens=len(generation.prompt_token_ids) if generation else 0,
        output_tokens=len(generation.generation_token_ids) if generation else 0,
    )
    return web.json_response(body)


async def _chat(
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


async def _spliced(
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
    assert state.config.eos_token_id is not None  # build_app refuses splicing without it
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
    url = _POLICY_URL.get(state.config.policy_urls[0]).rstrip("/") + path
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pytest_rollout_chaos.servers.gym.model_server")
    parser.add_argument(
        "--policy-url",
        required=True,
        action="append",
        help="Policy server root URL (OpenAI/vLLM API); once per replica",
    )
    parser.add_argument("--model", required=True, help="Served model name at the policy")
    parser.add_argument("--eos-token-id", type=int, default=None, help="End-of-turn token id (for splicing)")
    parser.add_argument("--no-splice", action="store_true", help="Re-render every prompt (vanilla vLLM)")
    parser.add_argument("--default-max-tokens", type=int, default=64)
    parser.add_argument("--request-timeout-s", type=float, default=60.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    config = ModelConfig(
        policy_urls=tuple(args.policy_url),
        model=args.model,
        eos_token_id=args.eos_token_id,
        splice=not args.no_splice,
        default_max_tokens=args.default_max_tokens,
        request_timeout_s=args.request_timeout_s,
    )
    try:
        app = build_app(config)
    except ValueError as error:
        parser.error(str(error))
    serve.serve(app, port=args.port)


if __name__ == "__main__":
    main()
