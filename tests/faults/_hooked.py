"""The real target of the fault tests: ``tests/programs/hook_server.py`` behind a real fault layer.

The server knows nothing of faults; the fault layer in front of it (its own process, one link
``client->hooked``) records the requests and applies the semantic faults, as in the stack.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.history import Event, History
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.faultlayer import client as layer
from pytest_rollout_chaos.servers.faultlayer.spec import fault_layer_spec
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec

REPO = Path(__file__).resolve().parents[2]
READY = readiness.all_of(readiness.address_known(), readiness.http_ok("/health"))


@dataclass
class Hooked:
    """One running server behind its own fault layer, the layer's events file, ways to talk to it."""

    process: ManagedProcess
    layer: ManagedProcess
    events_file: Path
    url: str  # the server as clients reach it: through the layer

    @classmethod
    def start(
        cls, directory: Path, name: str = "hooked", *, process_type: type[ManagedProcess] = ManagedProcess
    ) -> Hooked:
        events_file = directory / f"{name}.events.jsonl"
        spec = ServerSpec(
            name=name,
            argv=(sys.executable, "-m", "tests.programs.hook_server"),
            probe=READY,
            ready_timeout_s=30.0,
            cwd=REPO,
        )
        process = process_type(spec, directory / "logs")
        fault_layer = ManagedProcess(fault_layer_spec(events_file, name=f"{name}-layer"), directory / "logs")
        process.start()
        try:
            fault_layer.start()
            listen = layer.add_link(
                fault_layer.url, name=f"client->{name}", server=name, source=name, upstream=process.url
            )
        except BaseException:
            process.stop()
            fault_layer.stop()
            raise
        return cls(process, fault_layer, events_file, f"http://{listen}")

    def stop(self) -> None:
        self.process.stop()
        self.layer.stop()

    def context(self, **extra: Any) -> tuple[FaultContext, History]:
        """A fresh History following this server's layer, and a FaultContext over both."""
        history = History()
        history.follow(self.events_file)
        extra.setdefault("fault_layer", self.layer.url)
        ctx = FaultContext(history=history, processes={self.process.name: self.process}, **extra)
        return ctx, history

    async def post(self, path: str, body: Any = None, *, timeout_s: float = 5.0) -> tuple[int, bytes]:
        """POST JSON; return status and raw body (raw, so broken JSON can be asserted)."""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.post(f"{self.url}{path}", json=body if body is not None else {}) as response,
        ):
            return response.status, await response.read()


def wait_for(history: History, predicate: Callable[[Event], bool], *, timeout_s: float = 5.0) -> list[Event]:
    """Events matching ``predicate``, waiting (bounded) until there is at least one."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [event for event in history.events() if predicate(event)]
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)


def hook_hits(history: History, effect: str) -> list[Mapping[str, Any]]:
    return [event.data for event in history.events(op="hook") if event.data.get("effect") == effect]


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hooked]:
    """One server behind a fault layer per test module; semantic faults heal, so tests can share it."""
    server = Hooked.start(tmp_path_factory.mktemp("hooked"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_hooked(tmp_path: Path) -> Iterator[Hooked]:
    """A server (and layer) of this test alone, for faults that kill, freeze or restart it."""
    server = Hooked.start(tmp_path)
    try:
        yield server
    finally:
        server.stop()
