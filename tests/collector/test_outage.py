"""Asking an agent whether it is gone: refused is gone; an answer, or a held probe, is not."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

from pytest_rollout_chaos.collector.outage import Probes, gone


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
