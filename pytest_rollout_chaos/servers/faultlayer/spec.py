"""The ServerSpec of the fault layer process, and ``FaultLayer``, what its fixture yields."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.process import ServerSpec

MODULE: Final = "pytest_rollout_chaos.servers.faultlayer"
NAME: Final = "fault_layer"


def fault_layer_spec(events_file: Path, *, name: str = NAME) -> ServerSpec:
    """The layer's control API on 127.0.0.1, port chosen by the OS, ready when /health answers."""
    return ServerSpec(
        name=name,
        argv=(sys.executable, "-m", MODULE, "--port", "0"),
        probe=readiness.all_of(readiness.address_known(), readiness.http_ok("/health")),
        env={EVENTS_FILE_ENV: str(events_file)},
        ready_timeout_s=30.0,
        hint=f"run `python -m {MODULE} --port 0` by hand and read its output",
    )


@dataclass(frozen=True, slots=True)
class FaultLayer:
    """A running fault layer: its control API and the events file it records every link into."""

    url: str
    events_file: Path
