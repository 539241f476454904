"""The embedded server process: the real server's flags, -config, and its log."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_rollout_chaos.errors import ServerStartError
from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy import VERSION
from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient
from pytest_rollout_chaos.servers.toxiproxy.spec import EMBEDDED_MODULE
from tests.integration.toxiproxy._toxiproxy_testlib import Client, TcpTarget, echo


def test_version_flag() -> None:
    result = subprocess.run(
        [sys.executable, "-m", EMBEDDED_MODULE, "-version"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert result.stdout.strip() == VERSION


@pytest.mark.asyncio
async def test_config_file_proxies_exist_at_start_and_are_logged(
    start_embedded: Callable[..., ManagedProcess], tmp_path: Path
) -> None:
    target = await TcpTarget(echo).start()
    try:
        config = tmp_path / "toxiproxy.json"
        config.write_text(
            json.dumps([{"name": "from-config", "listen": "127.0.0.1:0", "upstream": target.address}])
        )
        events = tmp_path / "events.jsonl"
        process = start_embedded(config=config, env={EVENTS_FILE_ENV: str(events)})
        async with ToxiproxyClient(process.url) as api:
            proxy = (await api.proxies())["from-config"]
            await api.add_toxic(proxy.name, type="latency", attributes={"latency": 10})
            client = await Client.connect(proxy)
            try:
                await client.roundtrip_s()
            finally:
                client.close()
            await api.remove_toxic(proxy.name, "latency_downstream")
    finally:
        await target.stop()
    ops = [json.loads(line)["op"] for line in events.read_text().splitlines()]
    assert ops == ["proxy enable", "toxic add", "toxic remove"]
    deadline = time.monotonic() + 5.0  # the proxy logs a connection once both directions ended
    while "closed client" not in process.log_path.read_text() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    log = process.log_path.read_text()
    for expected in ("populated 1 proxies", "closed client", "added toxic", "removed toxic"):
        assert expected in log, log


def test_bad_config_fails_the_start_with_the_reason(
    start_embedded: Callable[..., ManagedProcess], tmp_path: Path
) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps([{"name": "no-upstream"}]))
    with pytest.raises(ServerStartError, match=r"missing required field: upstream at proxy 1"):
        start_embedded(config=config)
