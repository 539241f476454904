"""The model server over several policy replicas (in-process apps): round robin per model call, every
request of one call to the same replica, narrowed by ``/_gym/replicas`` until ``/_gym/reset``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers.gym import model_server, policy_client


def _policy(name: str, seen: list[tuple[str, str]]) -> web.Application:
    """A policy replica that answers chat completions and ``/tokenize``, noting who got what."""

    async def chat(request: web.Request) -> web.Response:
        seen.append((name, request.path))
        choice = {
            "message": {"role": "assistant", "content": "4"},
            "logprobs": {"content": [{"token": "token_id:7", "logprob": -0.25}]},
            "finish_reason": "stop",
        }
        return web.json_response({"choices": [choice]})

    async def tokenize(request: web.Request) -> web.Response:
        seen.append((name, request.path))
        return web.json_response({"tokens": [1, 2, 3]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/tokenize", tokenize)
    return app


@pytest_asyncio.fixture
async def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[dict[str, Any]]:
    monkeypatch.setenv(EVENTS_FILE_ENV, str(tmp_path / "events.jsonl"))
    seen: list[tuple[str, str]] = []
    async with TestServer(_policy("a", seen)) as first, TestServer(_policy("b", seen)) as second:
        config = policy_client.ModelConfig(
            policy_urls=(str(first.make_url("")), str(second.make_url(""))),
            model="m",
            eos_token_id=None,
            splice=False,
        )
        async with TestServer(model_server.build_app(config)) as model, ClientSession() as client:
            yield {"url": str(model.make_url("")).rstrip("/"), "client": client, "seen": seen}


async def _calls(stack: dict[str, Any], n: int) -> list[str]:
    """Make ``n`` model calls one after another; which replica served each (both its requests)."""
    replicas = []
    for _ in range(n):
        stack["seen"].clear()
        body = {"input": [{"role": "user", "content": "2+2?"}]}
        async with stack["client"].post(stack["url"] + "/v1/responses", json=body) as response:
            assert response.status == 200, await response.text()
        served_by = {name for name, _ in stack["seen"]}
        assert len(served_by) == 1, f"one call spread over replicas: {stack['seen']}"
        assert len(stack["seen"]) == 2  # the generation and its /tokenize
        replicas.append(served_by.pop())
    return replicas


async def _control(stack: dict[str, Any], path: str, body: dict[str, Any]) -> int:
    async with stack["client"].post(stack["url"] + path, json=body) as response:
        return int(response.status)


@pytest.mark.asyncio
async def test_calls_take_turns_over_the_replicas_each_call_on_one(stack: dict[str, Any]) -> None:
    assert await _calls(stack, 4) == ["a", "b", "a", "b"]


@pytest.mark.asyncio
async def test_replicas_narrows_the_turns_until_reset(stack: dict[str, Any]) -> None:
    assert await _control(stack, "/_gym/replicas", {"count": 1}) == 200
    assert await _calls(stack, 3) == ["a", "a", "a"]
    assert await _control(stack, "/_gym/replicas", {"count": 3}) == 400  # only 2 were given
    assert await _control(stack, "/_gym/reset", {}) == 200
    assert set(await _calls(stack, 2)) == {"a", "b"}
