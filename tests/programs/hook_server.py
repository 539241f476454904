"""A small real server with the response shapes the fault layer rewrites; it knows nothing of faults.

Routes: ``/health``; ``/v1/chat/completions`` (chat logprobs, ``prompt_token_ids``, choice
``token_ids``); ``/v1/completions`` (``token_logprobs``); ``/v1/responses`` (a Gym output item
with ``prompt_token_ids``/``generation_token_ids``/``generation_log_probs``); ``/run`` (a Gym
result with the output nested, echoing ``_rowidx``); ``/step_batch`` (one observation per item);
``/stream`` (a streamed answer). Generated ids are deterministic: the
prompt is ``[1..n]`` for ``n`` = the body's ``prompt_len`` (default 8) and the generation
``[100, 101, 102]``, so a test can build a second turn that contains the first one.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pytest_rollout_chaos.servers.serve import serve

GENERATION = [100, 101, 102]
LOGPROBS = [-0.5, -0.25, -0.125]


async def _body(request: web.Request) -> dict[str, Any]:
    if not request.body_exists:
        return {}
    data = await request.json()
    return data if isinstance(data, dict) else {"items": data}


def _prompt(body: dict[str, Any]) -> list[int]:
    given = body.get("prompt_token_ids")
    if isinstance(given, list):
        return [int(token) for token in given]
    return list(range(1, int(body.get("prompt_len", 8)) + 1))


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def chat(request: web.Request) -> web.Response:
    body = await _body(request)
    content = [{"token": f"token_id:{t}", "logprob": lp} for t, lp in zip(GENERATION, LOGPROBS, strict=True)]
    return web.json_response(
        {
            "object": "chat.completion",
            "prompt_token_ids": _prompt(body),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "abc"},
                    "logprobs": {"content": content},
                    "token_ids": GENERATION,
                    "finish_reason": "length",
                }
            ],
        }
    )


async def completions(request: web.Request) -> web.Response:
    body = await _body(request)
    return web.json_response(
        {
            "object": "text_completion",
            "choices": [
                {
                    "index": 0,
                    "text": "abc",
                    "prompt_token_ids": _prompt(body),
                    "logprobs": {"token_logprobs": LOGPROBS, "tokens": ["a", "b", "c"]},
                }
            ],
        }
    )


def _output_item(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "prompt_token_ids": _prompt(body),
        "generation_token_ids": GENERATION,
        "generation_log_probs": LOGPROBS,
    }


async def responses(request: web.Request) -> web.Response:
    return web.json_response({"object": "response", "output": [_output_item(await _body(request))]})


async def run(request: web.Request) -> web.Response:
    body = await _body(request)
    return web.json_response(
        {"_rowidx": body.get("_rowidx"), "reward": 1.0, "response": {"output": [_output_item(body)]}}
    )


async def step_batch(request: web.Request) -> web.Response:
    body = await _body(request)
    items = body.get("items") or body.get("message_logs") or []
    return web.json_response({"observations": [f"obs {index}" for index in range(len(items))]})


async def stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    response.content_type = "application/json"
    await response.prepare(request)
    await response.write(b'{"generation_log_probs": [-0.5]}')
    await response.write_eof()
    return response


def main() -> None:
    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/responses", responses)
    app.router.add_post("/run", run)
    app.router.add_post("/step_batch", step_batch)
    app.router.add_post("/stream", stream)
    serve(app)


if __name__ == "__main__":
    main()
