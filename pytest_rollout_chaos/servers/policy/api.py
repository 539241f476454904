"""The policy server's HTTP routes, in vLLM's OpenAI-server shapes.

``/health``, ``/version``, ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``,
``/tokenize``, ``/detokenize`` and vLLM's token-in, token-out ``/inference/v1/generate`` (the
route SkyRL's ``RemoteInferenceClient`` generates through). Generation goes through the batching
``Engine``; the handlers only translate between JSON and token ids.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from typing import Any, Final

from aiohttp import web

from pytest_rollout_chaos.servers.policy.chat import TemplateError, parse_tool_calls
from pytest_rollout_chaos.servers.policy.engine import Engine, Generation, SamplingParams
from pytest_rollout_chaos.servers.policy.protocol import (
    MAX_LOGPROBS,
    RESEED_ROUTE,
    ApiError,
    chat_tools,
    context_overflow,
    flag,
    json_body,
    max_tokens_too_large,
    number,
    optional_int,
    reject_sampling_knobs,
    reject_unsupported,
    stop_strings,
    token_id_list,
)
from pytest_rollout_chaos.servers.policy.tokenization import PolicyTokenizer

VERSION: Final = "0.0.0+rollout-chaos-tiny"
_logger = logging.getLogger(__name__)


class PolicyApi:
    """Route handlers over one engine and tokenizer."""

    def __init__(
        self, engine: Engine, tokenizer: PolicyTokenizer, *, served_model_name: str, root: str
    ) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.model_name = served_model_name
        self.root = root
        self.created = int(time.time())

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/health", self.health),
            web.get("/version", self.version),
            web.get("/v1/models", self.models),
            web.post("/v1/chat/completions", self._guarded(self.chat)),
            web.post("/v1/completions", self._guarded(self.completions)),
            web.post("/inference/v1/generate", self._guarded(self.generate)),
            web.post("/tokenize", self._guarded(self.tokenize)),
            web.post("/detokenize", self._guarded(self.detokenize)),
            web.post(RESEED_ROUTE, self._guarded(self.reseed)),
        ]

    @staticmethod
    def _guarded(handler: Any) -> Any:
        async def guarded(request: web.Request) -> web.StreamResponse:
            try:
                body = await json_body(request)
                return web.json_response(await handler(body))
            except ApiError as error:
                return error.response()
            except TemplateError as error:
                return ApiError(str(error)).response()
            except Exception as error:  # a server bug still answers in vLLM's error shape
                _logger.exception("request failed")
                message = f"{type(error).__name__}: {error}"
                return ApiError(message, status=500, kind="InternalServerError").response()

        return guarded

    async def reseed(self, body: dict[str, Any]) -> dict[str, Any]:
        """Not vLLM's: the harness gives unseeded requests a scenario's own seeds
        (``stack.policy.seed``), or the session's again (``seed`` null)."""
        seed = optional_int(body, "seed", minimum=0)
        self.engine.reseed(seed)
        return {"seed": seed}

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VERSION})

    async def models(self, request: web.Request) -> web.Response:
        card = {
            "id": self.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm",
            "root": self.root,
            "parent": None,
            "max_model_len": self.engine.max_model_len,
        }
        return web.json_response({"object": "list", "data": [card]})

    # -- helpers -------------------------------------------------------------------------------
    def _check_model(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        if model is not None and model != self.model_name:
            raise ApiError(f"The model `{model}` does not exist.", status=404, kind="NotFoundError")

    def _params(self, body: dict[str, Any], prompt_tokens: int, top_logprobs: int) -> SamplingParams:
        limit = self.engine.max_model_len
        if prompt_tokens >= limit:
            raise context_overflow(prompt_tokens, limit)
        max_tokens = optional_int(body, "max_completion_tokens", minimum=1)
        if max_tokens is None:
            max_tokens = optional_int(body, "max_tokens", minimum=1)
        if max_tokens is None:
            max_tokens = limit - prompt_tokens
        if max_tokens > limit - prompt_tokens:
            raise max_tokens_too_large(max_tokens, prompt_tokens, limit)
        stop_ids = body.get("stop_token_ids") or []
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=number(body, "temperature", 1.0, low=0.0, high=2.0),
            top_p=number(body, "top_p", 1.0, low=1e-6, high=1.0),
            seed=optional_int(body, "seed", minimum=-(2**63)),
            stop=stop_strings(body),
            stop_token_ids=frozenset(token_id_list(stop_ids, "stop_token_ids", self.tokenizer.vocab_size)),
            top_logprobs=top_logprobs,
            ignore_eos=flag(body, "ignore_eos"),
            include_stop_str_in_output=flag(body, "include_stop_str_in_output"),
        )

    async def _generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        try:
            return await self.engine.generate(prompt_ids, params)
        except ValueError as error:
            raise ApiError(str(error)) from error

    def _token_name(self, token_id: int, as_ids: bool) -> str:
        return f"token_id:{token_id}" if as_ids else self.tokenizer.token_text(token_id)

    def _usage(self, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        return {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": None,
        }

    # -- chat ----------------------------------------------------------------------------------
    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_model(body)
        reject_unsupported(body)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError("messages: expected a non-empty list of chat messages")
        tools = chat_tools(body)
        tool_choice = body.get("tool_choice", "auto" if tools else "none")
        if tool_choice not in ("auto", "none", None):
            raise ApiError(
                f"tool_choice: {tool_choice!r} is not supported by the tiny backend (valid: auto, none)"
            )
        prompt_ids = self.tokenizer.render_chat(
            messages, tools=tools, add_generation_prompt=flag(body, "add_generation_prompt", True)
        )
        want_logprobs = flag(body, "logprobs")
        top = optional_int(body, "top_logprobs", maximum=MAX_LOGPROBS) or 0
        if top and not want_logprobs:
            raise ApiError("top_logprobs: requires logprobs=true")
        generation = await self._generate(prompt_ids, self._params(body, len(prompt_ids), top))
        as_ids = flag(body, "return_tokens_as_token_ids")
        message: dict[str, Any] = {"role": "assistant", "content": generation.text, "tool_calls": []}
        finish_reason: str = generation.finish_reason
        if tools and tool_choice == "auto":
            parsed = parse_tool_calls(generation.text)
            if parsed.tool_calls:
                message = {"role": "assistant", "content": parsed.content, "tool_calls": parsed.tool_calls}
                finish_reason = "tool_calls"
        message["reasoning_content"] = None
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "logprobs": self._chat_logprobs(generation, top, as_ids) if want_logprobs else None,
            "finish_reason": finish_reason,
            "stop_reason": generation.stop_reason,
        }
        return_ids = flag(body, "return_token_ids")
        if return_ids:
            choice["token_ids"] = generation.token_ids
        response: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [choice],
            "usage": self._usage(len(prompt_ids), len(generation.token_ids)),
            "prompt_logprobs": None,
        }
        if return_ids:
            response["prompt_token_ids"] = prompt_ids
        return response

    def _chat_logprobs(self, generation: Generation, top: int, as_ids: bool) -> dict[str, Any]:
        content = []
        for index, (token_id, logprob) in enumerate(
            zip(generation.token_ids, generation.logprobs, strict=True)
        ):
            name = self._token_name(token_id, as_ids)
            alternatives = generation.top_logprobs[index] if top else []
            content.append(
                {
                    "token": name,
                    "logprob": max(logprob, -9999.0),
                    "bytes": list(name.encode()),
                    "top_logprobs": [
                        {
                            "token": self._token_name(alt, as_ids),
                            "logprob": max(value, -9999.0),
                            "bytes": list(self._token_name(alt, as_ids).encode()),
                        }
                        for alt, value in alternatives
                    ],
                }
            )
        return {"content": content}

    # -- completions ---------------------------------------------------------------------------
    async def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_model(body)
        reject_unsupported(body)
        prompts = self._completion_prompts(body.get("prompt"), flag(body, "add_special_tokens", True))
        logprobs = optional_int(body, "logprobs", maximum=MAX_LOGPROBS)
        params = [self._params(body, len(ids), logprobs or 0) for ids in prompts]
        generations = await asyncio.gather(
            *(self._generate(ids, p) for ids, p in zip(prompts, params, strict=True))
        )
        as_ids = flag(body, "return_tokens_as_token_ids")
        return_ids = flag(body, "return_token_ids")
        choices = []
        for index, (ids, generation) in enumerate(zip(prompts, generations, strict=True)):
            choice: dict[str, Any] = {
                "index": index,
                "text": generation.text,
                "logprobs": None
                if logprobs is None
                else self._completion_logprobs(generation, logprobs, as_ids),
                "finish_reason": generation.finish_reason,
                "stop_reason": generation.stop_reason,
                "prompt_logprobs": None,
            }
            if return_ids:
                choice["prompt_token_ids"] = ids
                choice["token_ids"] = generation.token_ids
            choices.append(choice)
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": self._usage(sum(map(len, prompts)), sum(len(g.token_ids) for g in generations)),
        }

    def _completion_prompts(self, prompt: Any, add_special_tokens: bool) -> list[list[int]]:
        if isinstance(prompt, str):
            return [self.tokenizer.encode(prompt, add_special_tokens=add_special_tokens)]
        if isinstance(prompt, list) and prompt and all(isinstance(item, int) for item in prompt):
            return [token_id_list(prompt, "prompt", self.tokenizer.vocab_size)]
        if isinstance(prompt, list) and prompt and all(isinstance(item, (str, list)) for item in prompt):
            return [self._completion_prompts(item, add_special_tokens)[0] for item in prompt]
        raise ApiError("prompt: expected a string, a list of token ids, or a list of either")

    def _completion_logprobs(self, generation: Generation, top: int, as_ids: bool) -> dict[str, Any]:
        tokens = [self._token_name(token_id, as_ids) for token_id in generation.token_ids]
        offsets, position = [], 0
        for token_id in generation.token_ids:
            offsets.append(position)
            position += len(self.tokenizer.decode([token_id]))
        return {
            "text_offset": offsets,
            "token_logprobs": [max(value, -9999.0) for value in generation.logprobs],
            "tokens": tokens,
            "top_logprobs": [
                {self._token_name(alt, as_ids): max(value, -9999.0) for alt, value in alternatives}
                for alternatives in generation.top_logprobs
            ]
            if top
            else None,
        }

    # -- token in, token out ---------------------------------------------------------------------
    async def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        """vLLM's ``GenerateRequest`` (``token_ids``, a ``sampling_params`` object) in, its
        ``GenerateResponse`` out: one choice with ``token_ids``, ``finish_reason`` and, when
        ``sampling_params.logprobs`` is set, chat-shaped ``logprobs.content``."""
        self._check_model(body)
        for name in ("features", "kv_transfer_params"):
            if body.get(name):
                raise ApiError(f"{name}: not supported by the tiny backend")
        if body.get("stream"):
            raise ApiError("stream: streaming is not supported by the tiny backend (send stream=false)")
        prompt_ids = token_id_list(body.get("token_ids"), "token_ids", self.tokenizer.vocab_size)
        if not prompt_ids:
            raise ApiError("token_ids: expected a non-empty list of token ids")
        sampling = body.get("sampling_params") or {}
        if not isinstance(sampling, dict):
            raise ApiError("sampling_params: expected an object (vLLM's SamplingParams fields)")
        reject_unsupported(sampling)
        reject_sampling_knobs(sampling)
        top = optional_int(sampling, "logprobs", maximum=MAX_LOGPROBS)
        params = self._params(sampling, len(prompt_ids), top or 0)
        min_tokens = optional_int(sampling, "min_tokens") or 0
        generation = await self._generate(prompt_ids, dataclasses.replace(params, min_tokens=min_tokens))
        choice = {
            "index": 0,
            "logprobs": None if top is None else self._chat_logprobs(generation, top, as_ids=False),
            "finish_reason": generation.finish_reason,
            "token_ids": generation.token_ids,
        }
        return {
            "request_id": f"gen-{uuid.uuid4().hex}",
            "choices": [choice],
            "prompt_logprobs": None,
            "kv_transfer_params": None,
        }

    # -- tokenizer endpoints -------------------------------------------------------------------
    async def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_model(body)
        if "messages" in body:
            messages = body["messages"]
            if not isinstance(messages, list) or not messages:
                raise ApiError("messages: expected a non-empty list of chat messages")
            ids = self.tokenizer.render_chat(
                messages,
                tools=chat_tools(body),
                add_generation_prompt=flag(body, "add_generation_prompt", True),
            )
        elif isinstance(body.get("prompt"), str):
            ids = self.tokenizer.encode(
                body["prompt"], add_special_tokens=flag(body, "add_special_tokens", True)
            )
        else:
            raise ApiError("expected either 'prompt' (a string) or 'messages' (a list of chat messages)")
        strs = [self.tokenizer.token_text(t) for t in ids] if flag(body, "return_token_strs") else None
        return {
            "count": len(ids),
            "max_model_len": self.engine.max_model_len,
            "tokens": ids,
            "token_strs": strs,
        }

    async def detokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_model(body)
        ids = token_id_list(body.get("tokens"), "tokens", self.tokenizer.vocab_size)
        return {"prompt": self.tokenizer.decode(ids, skip_special_tokens=False)}
