"""A fault layer process and small upstream servers on the test's own loop, behind links of it.

A test sees exactly what reached the server, and the layer's record of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aiohttp
import pytest
from aiohttp import web

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.faultlayer import client as layer
from pytest_rollout_chaos.servers.faultlayer.spec import fault_layer_spec
from pytest_rollout_chaos.servers.process import ManagedProcess

WAIT_S: Final = 10.0  # bound on every wait for something the layer or a server does
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_names = itertools.count(1)


@dataclass(frozen=True)
class Layer:
    """A fault layer process of this module and the events file it records into."""

    process: ManagedProcess
    events_file: Path

    def history(self) -> History:
        history = History()
        history.follow(self.events_file)
        return history


@pytest.fixture(scope="module")
def fault_layer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layer]:
    """A fault layer process per test module."""
    directory = tmp_path_factory.mktemp("layer")
    events_file = directory / "layer.events.jsonl"
    process = ManagedProcess(fault_layer_spec(events_file, name="test-layer"), directory / "logs")
    process.start()
    try:
        yield Layer(process, events_file)
    finally:
        process.stop()


@dataclass(frozen=True)
class Upstream:
    """A server of this test behind the layer: its scenario name and its link URL."""

    server: str
    url: str


@contextlib.asynccontextmanager
async def upstream_behind(fault_layer: Layer, routes: Mapping[str, Handler]) -> AsyncIterator[Upstream]:
    """Serve ``routes`` (path -> handler, any method) on this loop, behind a new link of the layer."""
    async with serving(routes) as port:
        yield link_to(fault_layer, port)


def link_to(fault_layer: Layer, port: int) -> Upstream:
    """A new link of the layer (server ``plainN``) to ``127.0.0.1:port``."""
    server = f"plain{next(_names)}"
    listen = layer.add_link(
        fault_layer.process.url,
        name=f"client->{server}",
        server=server,
        source=server,
        upstream=f"http://127.0.0.1:{port}",
    )
    return Upstream(server, f"http://{listen}")


@contextlib.asynccontextmanager
async def serving(routes: Mapping[str, Handler], port: int = 0) -> AsyncIterator[int]:
    """Serve ``routes`` (path -> handler, any method) on this loop at ``port`` (0: any); yield it."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_route("*", path, handler)
    # handler_cancellation: a handler sees CancelledError when its client's connection closes
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


def client_session(timeout_s: float = 5.0) -> aiohttp.ClientSession:
    # no cookie jar: the Cookie header a test sends is the one that must arrive
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=timeout_s), cookie_jar=aiohttp.DummyCookieJar()
    )


async def within(event: asyncio.Event, what: str) -> None:
    """Wait (bounded) for ``event``; fail naming what did not happen."""
    try:
        await asyncio.wait_for(event.wait(), timeout=WAIT_S)
    except TimeoutError:
        pytest.fail(f"expected within {WAIT_S:.0f}s: {what}; it did not happen")


def closed_port() -> int:
    """A loopback port nothing listens on (bound once by us, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
