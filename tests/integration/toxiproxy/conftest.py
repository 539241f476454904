"""Toxiproxy servers under test: the embedded one always, a real one when present (else skipped).

Every conformance test runs once per server, so both are held to one standard.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio

from pytest_rollout_chaos.servers.ports import free_port
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient
from pytest_rollout_chaos.servers.toxiproxy.spec import binary_spec, embedded_spec
from tests.integration.toxiproxy._toxiproxy_testlib import ApiUnderTest, Handler, Rig, TcpTarget, blast, echo

NO_REAL_SERVER = "no real Toxiproxy: set TOXIPROXY_URL or put toxiproxy-server on PATH to run this against it"
TEST_SEED = 1234


@pytest.fixture(scope="session")
def start_embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ManagedProcess]]:
    """Factory: a fresh embedded server (stopped at session end)."""
    started: list[ManagedProcess] = []

    def start(*, seed: int = TEST_SEED, **kwargs: object) -> ManagedProcess:
        spec = embedded_spec(seed=seed, name=f"toxiproxy-{len(started)}", **kwargs)  # type: ignore[arg-type]
        process = ManagedProcess(spec, tmp_path_factory.mktemp("toxiproxy"))
        started.append(process)
        process.start()
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="session", params=["embedded", "real"])
def toxiproxy_api(
    request: pytest.FixtureRequest,
    start_embedded: Callable[..., ManagedProcess],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ApiUnderTest]:
    if request.param == "embedded":
        yield ApiUnderTest("embedded", start_embedded().url)
        return
    url = os.environ.get("TOXIPROXY_URL")
    if url:
        yield ApiUnderTest("real", url.rstrip("/"))
        return
    binary = shutil.which("toxiproxy-server")
    if binary is None:
        pytest.skip(NO_REAL_SERVER)
    process = ManagedProcess(binary_spec(binary, port=free_port()), tmp_path_factory.mktemp("toxiproxy-real"))
    process.start()
    try:
        yield ApiUnderTest("real", process.url)
    finally:
        process.stop()


@pytest_asyncio.fixture
async def api(toxiproxy_api: ApiUnderTest) -> AsyncIterator[ToxiproxyClient]:
    """A client of the server under test; deletes the proxies the test made."""
    async with ToxiproxyClient(toxiproxy_api.url) as client:
        before = set(await client.proxies())
        yield client
        for name in set(await client.proxies()) - before:
            await client.delete_proxy(name)


async def _rig(api: ToxiproxyClient, handler: Handler) -> AsyncIterator[Rig]:
    server = await TcpTarget(handler).start()
    try:
        proxy = await api.create_proxy(f"test-{uuid.uuid4().hex[:8]}", upstream=server.address)
        yield Rig(api, server, proxy)
    finally:
        await server.stop()


@pytest_asyncio.fixture
async def echo_rig(api: ToxiproxyClient) -> AsyncIterator[Rig]:
    """An echo server behind a fresh proxy."""
    async for rig in _rig(api, echo):
        yield rig


@pytest_asyncio.fixture
async def blast_rig(api: ToxiproxyClient) -> AsyncIterator[Rig]:
    """A 'send N bytes then close' server behind a fresh proxy."""
    async for rig in _rig(api, blast):
        yield rig
