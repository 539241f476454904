"""The ServerSpec of the fault layer process, and ``FaultLayer``, what its fixture yields.

``processes``: the layer's processes, its main one included (``workers``); each worker records
into its own events file beside the main one (``events_files``). 0 means the machine's cores,
at most ``MAX_PROCESSES``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.process import ServerSpec

MODULE: Final = "pytest_rollout_chaos.servers.faultlayer"
NAME: Final = "fault_layer"
MAX_PROCESSES: Final = 8  # past this the main process, deciding every request, is the bound


def layer_processes(asked: int) -> int:
    """How many processes the layer runs for ``asked`` (0: the machine's cores, capped)."""
    if asked < 0:
        raise ValueError(f"processes: expected 0 (the machine's cores) or more, got {asked!r}")
    return asked or max(1, min(os.cpu_count() or 1, MAX_PROCESSES))


def worker_events_file(events_file: Path, index: int) -> Path:
    """The events file of worker ``index`` (1-based), beside the main process's ``events_file``."""
    stem, dot, suffix = events_file.name.partition(".")
    return events_file.with_name(f"{stem}.worker{index}{dot}{suffix}")


def events_files(events_file: Path, processes: int) -> tuple[Path, ...]:
    """Every events file of a layer of ``processes`` processes (the main one first)."""
    return (events_file, *(worker_events_file(events_file, index) for index in range(1, processes)))


def fault_layer_spec(events_file: Path, *, name: str = NAME, processes: int = 1) -> ServerSpec:
    """The layer's control API on 127.0.0.1, port chosen by the OS, ready when /health answers
    (once its ``processes`` processes, 0 for the machine's cores, have started)."""
    return ServerSpec(
        name=name,
        argv=(sys.executable, "-m", MODULE, "--port", "0", "--processes", str(layer_processes(processes))),
        probe=readiness.all_of(readiness.address_known(), readiness.http_ok("/health")),
        env={EVENTS_FILE_ENV: str(events_file)},
        ready_timeout_s=30.0,
        hint=f"run `python -m {MODULE} --port 0` by hand and read its output",
    )


@dataclass(frozen=True, slots=True)
class FaultLayer:
    """A running fault layer: its control API and the events files it records every link into."""

    url: str
    events_file: Path
    processes: int = 1

    @property
    def events_files(self) -> tuple[Path, ...]:
        return events_files(self.events_file, self.processes)
