"""The Gym client against real HTTP servers on loopback: the real head app and a scripted agent app."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from pytest_rollout_chaos.collector.gym_client import GymClient, GymRequestError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.gym import head


async def _scripted_run(request: web.Request) -> web.Response:
    """An agent whose behaviour per row is written in the row itself."""
    row = await request.json()
    behaviour = row.get("behaviour", "ok")
    await asyncio.sleep(float(row.get("delay_s", 0.0)))
    if behaviour == "error":
        return web.json_response("Hit an exception in agent calling an inner server: boom", status=500)
    if behaviour == "hang":
        await asyncio.sleep(30)
    if behaviour == "malformed":
        return web.Response(text="{not json", content_type="application/json")
    return web.json_response({**row, "response": {"output": []}, "reward": 1.0})


@pytest_asyncio.fixture
async def stack() -> AsyncIterator[tuple[str, str]]:
    agent_app = web.Application()
    agent_app.router.add_post("/run", _scripted_run)
    async with TestServer(agent_app) as agent:
        agent_url = str(agent.make_url("")).rstrip("/")
        config = head.global_config(
            agents={"calculator_agent": (agent_url, "gym_resources", "gym_model")},
            model=("gym_model", "http://127.0.0.1:9"),
            resources=("gym_resources", "http://127.0.0.1:9"),
        )
        async with TestServer(head.build_app(config)) as head_server:
            yield str(head_server.make_url("")).rstrip("/"), agent_url


def _row(index: int, **extra: Any) -> dict[str, Any]:
    return {
        "agent_ref": {"name": "calculator_agent"},
        "_rowidx": index,
        "responses_create_params": {"input": []},
        **extra,
    }


@pytest.mark.asyncio
async def test_one_awaitable_per_row_in_completion_order(stack: tuple[str, str]) -> None:
    rows = [_row(0, delay_s=0.3), _row(1, delay_s=0.0), _row(2, delay_s=0.15)]
    history = History()
    async with GymClient(stack[0], history=history) as client:
        awaitables = list(client.run_examples(rows))
        assert len(awaitables) == 3
        finished = [await awaitable for awaitable in awaitables]
    assert [row["_rowidx"] for row, _ in finished] == [1, 2, 0]
    assert all(result["reward"] == 1.0 for _, result in finished)
    kinds = [(event.kind, event.data["row"]) for event in history.events(source="collector", op="run")]
    assert sorted(kinds) == sorted(
        [("invoke", 0), ("invoke", 1), ("invoke", 2), ("ok", 0), ("ok", 1), ("ok", 2)]
    )


@pytest.mark.asyncio
async def test_a_server_error_names_the_server_the_status_and_the_body(stack: tuple[str, str]) -> None:
    history = History()
    async with GymClient(stack[0], history=history) as client:
        (awaitable,) = client.run_examples([_row(5, behaviour="error")])
        with pytest.raises(GymRequestError) as caught:
            await awaitable
    error = caught.value
    assert (error.server, error.status) == ("calculator_agent", 500)
    assert error.url == stack[1] + "/run"
    assert "Hit an exception in agent calling an inner server: boom" in str(error)
    (failed,) = history.events(kind="fail")
    assert failed.data["row"] == 5


@pytest.mark.asyncio
async def test_the_client_has_no_deadline_of_its_own(stack: tuple[str, str]) -> None:
    """As NeMo Gym's helper: a hung agent leaves the awaitable pending; the caller's deadline ends it."""
    history = History()
    async with GymClient(stack[0], history=history) as client:
        (awaitable,) = client.run_examples([_row(0, behaviour="hang")])
        waiting = asyncio.ensure_future(awaitable)
        done, _ = await asyncio.wait({waiting}, timeout=1.5)
        assert not done, "the client gave up on its own"
        assert not history.events(source="collector", op="run_retry"), "the client gave up and retried"
        waiting.cancel()
    assert [event.kind for event in history.events(source="collector", op="run")] == ["invoke", "info"]


@pytest.mark.asyncio
async def test_an_opt_in_timeout_ends_each_awaitable(stack: tuple[str, str]) -> None:
    history = History()
    async with GymClient(stack[0], timeout_s=0.3, history=history) as client:
        started = time.monotonic()
        (awaitable,) = client.run_examples([_row(4, behaviour="hang")])
        with pytest.raises(GymRequestError, match=r"no answer within timeout_s=0.3 s") as caught:
            await awaitable
        assert time.monotonic() - started < 3.0
    assert (caught.value.server, caught.value.status) == ("calculator_agent", None)
    (failed,) = history.events(source="collector", kind="fail")
    assert failed.data["row"] == 4
    with pytest.raises(ValueError, match="timeout_s must be > 0 or None"):
        GymClient(stack[0], timeout_s=0)


@pytest.mark.asyncio
async def test_malformed_json_is_named(stack: tuple[str, str]) -> None:
    async with GymClient(stack[0]) as client:
        (awaitable,) = client.run_examples([_row(0, behaviour="malformed")])
        with pytest.raises(GymRequestError, match="malformed JSON body"):
            await awaitable


@pytest.mark.asyncio
async def test_dropped_connections_are_retried_every_half_second_until_the_agent_answers(
    stack: tuple[str, str],
) -> None:
    """Upstream's ``request``: ``ServerDisconnectedError`` before the answer is retried, without limit."""
    arrived: list[float] = []

    async def drop_twice(request: web.Request) -> web.Response:
        arrived.append(time.monotonic())
        if len(arrived) <= 2:
            assert request.transport is not None
            request.transport.close()  # no answer at all: the client sees a disconnect
        return web.json_response({**(await request.json()), "response": {"output": []}, "reward": 1.0})

    app = web.Application()
    app.router.add_post("/run", drop_twice)
    history = History()
    async with TestServer(app) as flaky:
        urls = {"calculator_agent": str(flaky.make_url("")).rstrip("/")}
        async with GymClient(stack[0], agent_urls=urls, history=history) as client:
            (awaitable,) = client.run_examples([_row(3)])
            row, result = await asyncio.wait_for(awaitable, timeout=10.0)
    assert (row["_rowidx"], result["reward"]) == (3, 1.0)
    assert len(arrived) == 3
    assert all(later - earlier >= 0.45 for earlier, later in itertools.pairwise(arrived))
    retries = history.events(source="collector", op="run_retry")
    assert [event.data["attempt"] for event in retries] == [1, 2]
    assert all("ServerDisconnectedError" in event.data["error"] for event in retries)
    assert [event.kind for event in history.events(source="collector", op="run")] == ["invoke", "ok"]


@pytest.mark.asyncio
async def test_a_refused_agent_is_retried_until_it_comes_up(stack: tuple[str, str]) -> None:
    """As upstream, a refused connection (``ClientConnectorError``) is retried; the row completes once
    the agent listens, which is why a killed agent hangs a collector without a deadline."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    history = History()
    app = web.Application()
    app.router.add_post("/run", _scripted_run)
    async with GymClient(
        stack[0], agent_urls={"calculator_agent": f"http://127.0.0.1:{port}"}, history=history
    ) as client:
        (awaitable,) = client.run_examples([_row(0)])
        waiting = asyncio.ensure_future(awaitable)
        await asyncio.sleep(1.2)
        assert not waiting.done()
        async with TestServer(app, port=port):
            _, result = await asyncio.wait_for(waiting, timeout=10.0)
    assert result["reward"] == 1.0
    retries = history.events(source="collector", op="run_retry")
    assert len(retries) >= 2
    assert "ClientConnectorError" in retries[0].data["error"]


@pytest.mark.asyncio
async def test_an_answer_cut_off_after_its_head_fails_at_once(stack: tuple[str, str]) -> None:
    """Upstream reads the body outside its retry loop: a cut body is an error, not a retry."""
    arrived: list[int] = []

    async def cut(request: web.Request) -> web.StreamResponse:
        arrived.append(1)
        response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "1000"})
        await response.prepare(request)
        await response.write(b'{"reward": ')
        assert request.transport is not None
        request.transport.close()
        return response

    app = web.Application()
    app.router.add_post("/run", cut)
    async with TestServer(app) as cutting:
        urls = {"calculator_agent": str(cutting.make_url("")).rstrip("/")}
        async with GymClient(stack[0], agent_urls=urls) as client:
            (awaitable,) = client.run_examples([_row(0)])
            with pytest.raises(GymRequestError, match="answer cut off") as caught:
                await asyncio.wait_for(awaitable, timeout=10.0)
    assert caught.value.status is None
    assert arrived == [1]


@pytest.mark.asyncio
async def test_short_results_yields_fewer_awaitables_once(stack: tuple[str, str]) -> None:
    async with GymClient(stack[0]) as client:
        client.short_results(2)
        short = [await awaitable for awaitable in client.run_examples([_row(i) for i in range(5)])]
        full = [await awaitable for awaitable in client.run_examples([_row(i) for i in range(5)])]
    assert (len(short), len(full)) == (3, 5)


@pytest.mark.asyncio
async def test_unknown_agents_and_bad_rows_are_explained(stack: tuple[str, str]) -> None:
    async with GymClient(stack[0]) as client:
        with pytest.raises(ValueError, match=r"row 0 \(_rowidx=7\) has no agent_ref.name"):
            client.run_examples([{"_rowidx": 7}])
        (awaitable,) = client.run_examples([{**_row(0), "agent_ref": {"name": "nobody"}}])
        with pytest.raises(GymRequestError, match="no agent named 'nobody'; known agents: calculator_agent"):
            await awaitable


@pytest.mark.asyncio
async def test_head_config_is_yaml_in_a_json_string_and_lists_instances(stack: tuple[str, str]) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(stack[0] + "/global_config_dict_yaml") as reply:
            text = await reply.text()
        async with session.get(stack[0] + "/server_instances") as reply:
            instances = await reply.json()
    config = yaml.safe_load(json.loads(text))
    assert config["calculator_agent"]["responses_api_agents"]["simple_agent"]["port"] == int(
        stack[1].rsplit(":")[-1]
    )
    assert {entry["name"] for entry in instances} == {"calculator_agent", "gym_model", "gym_resources"}


def test_run_examples_outside_an_event_loop_says_so() -> None:
    with pytest.raises(RuntimeError, match="inside a running event loop"):
        GymClient("http://127.0.0.1:9").run_examples([_row(0)])


@pytest.mark.asyncio
async def test_a_closed_client_refuses_and_records_calls(stack: tuple[str, str]) -> None:
    """Work a collector left running after its collection ended shows, and sends nothing."""
    history = History()
    async with GymClient(stack[0], history=history) as client:
        pass
    with pytest.raises(RuntimeError, match=r"GymClient is closed: .* rows \[3, 4\] are not sent"):
        client.run_examples([_row(3), _row(4)])
    [refused] = history.events(source="collector", op="run_examples_after_close")
    assert refused.data == {"rows": [3, 4]}
    assert not history.events(source="collector", op="run")
