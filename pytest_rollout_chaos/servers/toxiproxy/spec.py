"""ServerSpecs for the Toxiproxy servers we start: the embedded one and a ``toxiproxy-server`` binary."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.process import ServerSpec

EMBEDDED_MODULE = "pytest_rollout_chaos.servers.toxiproxy"
EMBEDDED_NAME: Final = "toxiproxy"  # the processes' names (their logs' too)
BINARY_NAME: Final = "toxiproxy-server"


def embedded_spec(
    *,
    seed: int,
    name: str = EMBEDDED_NAME,
    config: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ServerSpec:
    """The embedded server on 127.0.0.1, API port chosen by the OS, ready when /version answers."""
    argv = [sys.executable, "-m", EMBEDDED_MODULE, "-host", "127.0.0.1", "-port", "0", "-seed", str(seed)]
    if config is not None:
        argv += ["-config", str(config)]
    return ServerSpec(
        name=name,
        argv=tuple(argv),
        probe=readiness.all_of(readiness.address_known(), readiness.http_ok("/version")),
        env=dict(env or {}),
        ready_timeout_s=30.0,
        hint=f"run `python -m {EMBEDDED_MODULE} -port 0` by hand and read its output",
    )


def binary_spec(binary: str, *, port: int, name: str = BINARY_NAME) -> ServerSpec:
    """A real ``toxiproxy-server`` on 127.0.0.1:``port`` (it cannot report an OS-chosen API port)."""
    return ServerSpec(
        name=name,
        argv=(binary, "-host", "127.0.0.1", "-port", str(port)),
        probe=readiness.http_ok("/version"),
        port=port,
        ready_timeout_s=30.0,
        hint=f"run `{binary} -host 127.0.0.1 -port {port}` by hand and read its output",
    )
