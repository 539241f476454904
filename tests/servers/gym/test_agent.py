"""The agent loop over real HTTP (in-process apps): the real resources app and a scripted model server."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from pytest_rollout_chaos.history import EVENTS_FILE_ENV, History
from pytest_rollout_chaos.servers.gym import agent, resources, tasks

TOKENS = {"prompt_token_ids": [1, 2], "generation_token_ids": [3], "generation_log_probs": [-0.5]}


def _scripted_model(expression: str) -> tuple[web.Application, list[dict[str, Any]]]:
    """A model server that always calls the calculator with ``expression`` and records what it got."""
    ids = itertools.count()
    seen: list[dict[str, Any]] = []

    async def responses(request: web.Request) -> web.Response:
        seen.append(await request.json())
        call = {
            "id": f"fc_{next(ids)}",
            "type": "function_call",
            "call_id": f"call_{len(seen)}",
            "name": "calculator",
            "arguments": json.dumps({"expression": expression}),
            "status": "completed",
            **TOKENS,
        }
        usage = {"input_tokens": 2, "output_tokens": 1, "total_tokens": 3}
        body = {
            "id": "resp",
            "object": "response",
            "output": [call],
            "usage": usage,
            "incomplete_details": None,
        }
        return web.json_response(body)

    app = web.Application()
    app.router.add_post("/v1/responses", responses)
    return app, seen


@pytest_asyncio.fixture
async def servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[dict[str, Any]]:
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv(EVENTS_FILE_ENV, str(events))
    model_app, seen = _scripted_model("6 / 7")
    async with TestServer(resources.build_app()) as resources_server, TestServer(model_app) as model_server:
        config = agent.AgentConfig(
            name="calculator_agent",
            model_url=str(model_server.make_url("")).rstrip("/"),
            resources_url=str(resources_server.make_url("")).rstrip("/"),
            max_steps=3,
            request_timeout_s=10.0,
        )
        async with TestServer(agent.build_app(config)) as agent_server:
            yield {
                "agent": str(agent_server.make_url("")).rstrip("/"),
                "resources": config.resources_url,
                "model_seen": seen,
                "events": events,
            }


@pytest.mark.asyncio
async def test_tool_errors_reach_the_model_and_max_steps_ends_the_loop(servers: dict[str, Any]) -> None:
    row = tasks.calculator_row(6, "*", 7, row_index=9)
    async with ClientSession() as session:
        async with session.post(servers["agent"] + "/run", json=row) as reply:
            assert reply.status == 200, await reply.text()
            result = await reply.json()
        async with session.get(servers["resources"] + "/_gym/state") as reply:
            state = await reply.json()
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call_output"] * 3
    assert "invalid expression '6 / 7'" in json.loads(output[1]["output"])  # a 400 body, passed on as text
    assert (result["reward"], result["failure_reason"]) == (0.0, "no_answer")
    assert result["_rowidx"] == 9
    assert result["response"]["usage"]["total_tokens"] == 9  # summed over the three model calls
    # Each model call sees the input plus everything produced so far, token fields included.
    assert [len(body["input"]) for body in servers["model_seen"]] == [1, 3, 5]
    assert servers["model_seen"][1]["input"][1]["generation_token_ids"] == [3]
    assert state["sessions"] == 1  # one seeded session, carried to the tool by its cookie
    history = History(t0=0.0)
    history.follow(servers["events"], from_now=False)
    turns = [event.data for event in history.events(source="agent", op="turn")]
    assert turns == [{"row": 9, "turn": n, "prompt_len": 2, "generation_len": 1} for n in (1, 2, 3)]


@pytest.mark.asyncio
async def test_a_dead_model_server_is_a_500_naming_it(servers: dict[str, Any], unused_tcp_port: int) -> None:
    dead = f"http://127.0.0.1:{unused_tcp_port}"
    config = agent.AgentConfig("a", dead, servers["resources"], request_timeout_s=5.0)
    async with (
        TestServer(agent.build_app(config)) as agent_server,
        ClientSession() as session,
        session.post(agent_server.make_url("/run"), json=tasks.echo_row("apple")) as reply,
    ):
        assert reply.status == 500
        text = json.loads(await reply.text())
    assert text.startswith(f"Hit an exception in a calling an inner server: model at {dead}")
    assert "no response" in text


def test_max_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_steps must be >= 1, got 0"):
        agent.build_app(agent.AgentConfig("a", "http://m", "http://r", max_steps=0))
