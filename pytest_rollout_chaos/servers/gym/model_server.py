"""The Gym model server: ``POST /v1/responses`` on top of an OpenAI/vLLM policy server.

It behaves like NeMo Gym's ``vllm_model`` in training mode (``return_token_id_information``):
Responses input is converted to chat messages, the policy generates (``policy_client`` asks it),
and the output items carry ``prompt_token_ids``, ``generation_token_ids`` and
``generation_log_probs`` on the last item of the call. Prompt ids come from the policy's
``/tokenize``. ``finish_reason: length`` and a policy 400 about the context length become
``incomplete_details: {reason: max_output_tokens}`` (the latter with an empty message and no
token ids, as NeMo Gym does).

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
from typing import Final

from aiohttp import web

from pytest_rollout_chaos.servers import serve
from pytest_rollout_chaos.servers.gym import convert, policy_client
from pytest_rollout_chaos.servers.gym.base import close_session_on_cleanup, gym_app, json_object
from pytest_rollout_chaos.servers.loopback import loopback_only

STATE_KEY: Final = web.AppKey("model_state", policy_client.ModelState)


def build_app(config: policy_client.ModelConfig) -> web.Application:
    """The model server app."""
    if config.splice and config.eos_token_id is None:
        raise ValueError("splicing needs the end-of-turn token id (--eos-token-id), or pass --no-splice")
    app, writer = gym_app("model", "model")
    app[STATE_KEY] = policy_client.ModelState(config, writer, splice=config.splice)
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
    policy_client.POLICY_URL.set(state.next_policy_url())
    messages = convert.input_to_messages(params.get("input", []))
    chat_tools = convert.tools_to_chat(params.get("tools"))
    spliced = False
    try:
        prefix = convert.last_model_prefix(messages) if state.splice else None
        if prefix is None:
            generation = await policy_client.chat(state, params, messages, chat_tools)
        else:
            spliced = True
            generation = await policy_client.spliced(
                state, params, messages, chat_tools, prefix_index=prefix[0], model_prefix=prefix[1]
            )
    except policy_client.ContextLengthExceeded:
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
    config = policy_client.ModelConfig(
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
