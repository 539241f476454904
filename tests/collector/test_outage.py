"""Asking an agent whether it is gone: refused is gone; an answer, or a held probe, is not. The
reference fails the collection on a gone agent, naming it and its rows, and keeps a stuck row of
one that answers as aborted."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

from pytest_rollout_chaos.collector.outage import Probes, gone
from pytest_rollout_chaos.collector.protocol import InfrastructureError
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from tests.collector._fake_gym import FakeGym, context, rows


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest_asyncio.fixture
async def server() -> AsyncIterator[str]:
    """A server that answers 404 on ``/`` and holds ``/hold`` until the test is over."""
    released = asyncio.Event()

    async def hold(_request: web.Request) -> web.Response:
        await released.wait()
        return web.Response()

    app = web.Application()
    app.router.add_get("/hold/", hold)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        released.set()
        await runner.cleanup()


@pytest.mark.asyncio
async def test_a_server_that_refuses_is_gone() -> None:
    why = await gone(f"http://127.0.0.1:{closed_port()}")
    assert why is not None
    assert "Connect" in why


@pytest.mark.asyncio
async def test_a_server_that_answers_anything_or_holds_the_probe_is_there(server: str) -> None:
    assert await gone(server) is None  # 404 on /
    assert await gone(server + "/hold", timeout_s=0.2) is None


class Directory:
    """A Gym client that knows where each agent is, and counts the questions."""

    def __init__(self, urls: dict[str, str]) -> None:
        self.urls = urls
        self.asked = 0

    async def agent_url(self, agent: str) -> str:
        self.asked += 1
        await asyncio.sleep(0.01)
        return self.urls[agent]


@pytest.mark.asyncio
async def test_rows_that_time_out_together_share_one_probe_and_no_directory_learns_nothing() -> None:
    directory = Directory({"echo_agent": f"http://127.0.0.1:{closed_port()}"})
    probes = Probes(directory)
    answers = await asyncio.gather(*(probes.gone("echo_agent") for _ in range(4)))
    assert all(answer is not None for answer in answers)
    assert directory.asked == 1
    assert await Probes(object()).gone("echo_agent") is None


class DeadAgentGym(FakeGym):
    """The fake Gym whose agent ``calculator_agent`` is at ``url``: gone when nothing listens."""

    def __init__(self, url: str, scripts: dict[int, list[str]]) -> None:
        super().__init__(scripts)
        self.url = url

    async def agent_url(self, agent: str) -> str:
        return self.url


@pytest.mark.asyncio
async def test_the_reference_fails_the_collection_naming_a_gone_agent_and_its_rows() -> None:
    gym = DeadAgentGym(f"http://127.0.0.1:{closed_port()}", {1: ["hang"], 3: ["hang"]})
    collector = ReferenceCollector(context(gym, request_timeout_s=0.3))
    with pytest.raises(InfrastructureError) as raised:
        await collector.collect(rows(4), mode="train")
    text = str(raised.value)
    assert "agent 'calculator_agent' is gone: no /run result for row " in text
    assert "cannot complete: rows [1, 3]" in text  # rows 0 and 2 had their results


@pytest.mark.asyncio
async def test_the_reference_keeps_a_stuck_row_of_an_agent_that_answers_as_aborted(server: str) -> None:
    gym = DeadAgentGym(server, {1: ["hang"]})
    rollouts = await ReferenceCollector(context(gym, request_timeout_s=0.3)).collect(rows(4), mode="train")
    assert [rollout.status for rollout in rollouts] == ["completed", "aborted", "completed", "completed"]
