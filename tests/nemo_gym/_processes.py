"""Which running processes this pytest worker started, so that a check for leftovers run under
pytest-xdist sees only its own: every process a worker starts, and every process those start,
inherits the worker's ``PYTEST_XDIST_WORKER`` (none outside xdist), and keeps it when orphaned."""

from __future__ import annotations

import os
from collections.abc import Callable

import psutil

WORKER = "PYTEST_XDIST_WORKER"


def started_here(wanted: Callable[[psutil.Process], bool]) -> set[int]:
    """Pids of the running processes ``wanted`` picks that this worker (or this session) started."""
    mine = os.environ.get(WORKER)
    found = set()
    for process in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            if wanted(process) and process.environ().get(WORKER) == mine:
                found.add(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue  # gone, or not ours to read: not started here
    return found
