"""Fixtures of the fault tests: hook servers (shared, or private for faults that end them) and proxies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy.spec import embedded_spec
from tests.faults._hooked import hooked, own_hooked  # noqa: F401 - the hook-server fixtures
from tests.faults._netrig import NetRig
from tests.integration.toxiproxy._toxiproxy_testlib import blast, echo


@pytest.fixture(scope="session")
def toxiproxy_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded Toxiproxy server, one per session, for the network faults."""
    process = ManagedProcess(embedded_spec(seed=7, name="toxiproxy-faults"), tmp_path_factory.mktemp("toxi"))
    process.start()
    try:
        yield process.url
    finally:
        process.stop()


@pytest_asyncio.fixture
async def echo_net(toxiproxy_url: str) -> AsyncIterator[NetRig]:
    """An echo target behind a fresh proxy, as the link ``"link"`` of a FaultContext."""
    async with NetRig.open(toxiproxy_url, echo) as rig:
        yield rig


@pytest_asyncio.fixture
async def blast_net(toxiproxy_url: str) -> AsyncIterator[NetRig]:
    """A "send N bytes, then close" target behind a fresh proxy, as the link ``"link"``."""
    async with NetRig.open(toxiproxy_url, blast) as rig:
        yield rig
