"""The Gym agent server: NeMo Gym's ``simple_agent`` loop behind ``POST /run``.

``/run`` takes a row: seed a session on the resources server (its cookies travel with every
later resources call), then call the model server's ``/v1/responses`` with the input plus
everything produced so far; run each ``function_call`` against ``resources:/<tool>`` (a non-2xx
answer is not an error: its body text becomes the ``function_call_output``, as in NeMo Gym);
stop on ``incomplete_details.reason == max_output_tokens``, on an assistant message without
calls, or after ``max_steps`` model calls; then ``resources:/verify``. The answer is the verify
response: the row plus ``response`` and ``reward``. ``POST /v1/responses`` runs the loop alone.

Each model call is recorded as ``info turn {row, turn, prompt_len, generation_len}``.

Run as ``python -m pytest_rollout_chaos.servers.gym.agent --name NAME --model-url URL
--resources-url URL [--max-steps N]``.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
from aiohttp import web

from pytest_rollout_chaos.history import EventWriter
from pytest_rollout_chaos.servers import serve
from pytest_rollout_chaos.servers.gym.base import (
    InnerServerError,
    close_session_on_cleanup,
    gym_app,
    json_object,
)


@dataclass(frozen=True, slots=True)
class AgentConfig:
    name: str
    model_url: str
    resources_url: str
    max_steps: int = 8
    request_timeout_s: float = 120.0


@dataclass(slots=True)
class AgentState:
    config: AgentConfig
    writer: EventWriter
    session: aiohttp.ClientSession | None = None

    def client(self) -> aiohttp.ClientSession:
        if self.session is None:
            # Cookies are handled by hand per trajectory, as NeMo Gym does (DummyCookieJar).
            self.session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.config.request_timeout_s),
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self.session


STATE_KEY: Final = web.AppKey("agent_state", AgentState)


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    text: str
    cookies: dict[str, str]


def build_app(config: AgentConfig) -> web.Application:
    """The agent server app."""
    if config.max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {config.max_steps}")
    app, writer = gym_app(config.name, "agent")
    app[STATE_KEY] = AgentState(config, writer)
    app.router.add_post("/run", run)
    app.router.add_post("/v1/responses", responses)
    close_session_on_cleanup(app, STATE_KEY)
    return app


async def run(request: web.Request) -> web.Response:
    """One whole trajectory: seed, loop, verify."""
    row = await json_object(request)
    state = request.app[STATE_KEY]
    params = row.get("responses_create_params")
    if not isinstance(params, dict):
        raise web.HTTPBadRequest(
            text=json.dumps("/run needs 'responses_create_params' (an object with 'input')"),
            content_type="application/json",
        )
    seeded = await _post(state, "resources", state.config.resources_url, "/seed_session", row, cookies={})
    _raise_for_status(seeded, "resources", state.config.resources_url + "/seed_session")
    response, cookies = await _loop(state, params, seeded.cookies, row.get("_rowidx"))
    verified = await _post(
        state,
        "resources",
        state.config.resources_url,
        "/verify",
        {**row, "response": response},
        cookies=cookies,
    )
    _raise_for_status(verified, "resources", state.config.resources_url + "/verify")
    return web.Response(text=verified.text, content_type="application/json")


async def responses(request: web.Request) -> web.Response:
    """The agent loop alone, as NeMo Gym's agent ``/v1/responses``."""
    params = await json_object(request)
    state = request.app[STATE_KEY]
    response, cookies = await _loop(state, params, dict(request.cookies), None)
    reply = web.json_response(response)
    for key, value in cookies.items():
        reply.set_cookie(key, value)
    return reply


async def _loop(
    state: AgentState, params: dict[str, Any], cookies: dict[str, str], row: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    config = state.config
    given = params.get("input", [])
    inputs: list[Any] = [{"role": "user", "content": given}] if isinstance(given, str) else list(given)
    outputs: list[dict[str, Any]] = []
    usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    model_response: dict[str, Any] = {}
    for turn in range(1, config.max_steps + 1):
        reply = await _post(
            state,
            "model",
            config.model_url,
            "/v1/responses",
            {**params, "input": inputs + outputs},
            cookies={},
        )
        _raise_for_status(reply, "model", config.model_url + "/v1/responses")
        model_response = _parse_response(reply.text, config.model_url)
        produced = [item for item in model_response["output"] if isinstance(item, dict)]
        outputs.extend(produced)
        _add_usage(usage, model_response.get("usage"))
        state.writer.emit("info", "turn", {"row": row, "turn": turn, **_token_lengths(produced)})
        incomplete = model_response.get("incomplete_details") or {}
        if incomplete.get("reason") == "max_output_tokens":
            break
        calls = [item for item in produced if item.get("type") == "function_call"]
        for call in calls:
            arguments = json.loads(str(call.get("arguments", "{}")))  # NeMo Gym: invalid JSON fails the run
            tool = await _post(
                state, "resources", config.resources_url, f"/{call.get('name')}", arguments, cookies=cookies
            )
            cookies = {**cookies, **tool.cookies}
            outputs.append(
                {
                    "id": f"fco_{uuid.uuid4().hex}",
                    "type": "function_call_output",
                    "call_id": call.get("call_id"),
                    "output": tool.text,
                    "status": "completed",
                }
            )
        messages = [
            item for item in produced if item.get("type") == "message" and item.get("role") == "assistant"
        ]
        if not calls and messages:
            break
    final = {**model_response, "output": outputs}
    if model_response:
        final["usage"] = {
            **usage,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
    return final, cookies


def _parse_response(text: str, model_url: str) -> dict[str, Any]:
    try:
        body = json.loads(text)
    except ValueError as error:
        raise InnerServerError(
            "model", model_url, 200, f"malformed JSON ({error}): {text[:200]!r}"
        ) from error
    if not isinstance(body, dict) or not isinstance(body.get("output"), list):
        raise TypeError(f"Received an invalid response from model server: {text[:500]}")
    return body


def _token_lengths(items: list[dict[str, Any]]) -> dict[str, int]:
    for item in reversed(items):
        if "generation_token_ids" in item:
            return {
                "prompt_len": len(item.get("prompt_token_ids") or []),
                "generation_len": len(item.get("generation_token_ids") or []),
            }
    return {"prompt_len": 0, "generation_len": 0}


def _add_usage(total: dict[str, int], usage: Any) -> None:
    if isinstance(usage, Mapping):
        for key in total:
            value = usage.get(key)
            if isinstance(value, int):
                total[key] += value


async def _post(
    state: AgentState, server: str, base_url: str, path: str, body: Any, *, cookies: Mapping[str, str]
) -> Reply:
    url = base_url.rstrip("/") + path
    headers = {"Cookie": "; ".join(f"{key}={value}" for key, value in cookies.items())} if cookies else {}
    try:
        async with state.client().post(url, json=body, headers=headers) as response:
            text = await response.text()
            new_cookies = {key: morsel.value for key, morsel in response.cookies.items()}
            return Reply(response.status, text, new_cookies)
    except TimeoutError as error:
        raise InnerServerError(
            server, url, None, f"no answer within {state.config.request_timeout_s} s"
        ) from error
    except aiohttp.ClientError as error:
        raise InnerServerError(server, url, None, f"{type(error).__name__}: {error}") from error


def _raise_for_status(reply: Reply, server: str, url: str) -> None:
    if reply.status >= 300:
        raise InnerServerError(server, url, reply.status, reply.text[:500])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pytest_rollout_chaos.servers.gym.agent")
    parser.add_argument("--name", required=True, help="Agent instance name (agent_ref.name)")
    parser.add_argument("--model-url", required=True, help="Gym model server root URL")
    parser.add_argument("--resources-url", required=True, help="Resources server root URL")
    parser.add_argument("--max-steps", type=int, default=8, help="Model calls per trajectory at most")
    parser.add_argument("--request-timeout-s", type=float, default=120.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    config = AgentConfig(
        args.name, args.model_url, args.resources_url, args.max_steps, args.request_timeout_s
    )
    try:
        app = build_app(config)
    except ValueError as error:
        parser.error(str(error))
    serve.serve(app, port=args.port)


if __name__ == "__main__":
    main()
