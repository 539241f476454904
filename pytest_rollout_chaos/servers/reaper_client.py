"""pytest's side of the reaper (``servers.reaper``), the watchdog that outlives pytest to clean up.

Each pytest process starts one reaper, lazily, and tells it over a pipe what must die with
pytest: the process groups it starts (every ``ManagedProcess``, but also a gate's side and the
``nemo_gym`` target's child), the directories Ray's workers name, the namespaces and links of
``hosts:N``. It stands apart from ``ManagedProcess`` because all of those register here.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

_logger = logging.getLogger(__name__)


class _Reaper:
    """Client side of ``reaper.py``: one watchdog process per pytest process, started lazily."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._popen: subprocess.Popen[str] | None = None
        self._owner_pid = -1
        self._watch: list[str] = []

    def watch_controller(self, pid: int) -> None:
        """This process is an xdist worker of controller ``pid``: its reaper, started from now on,
        also acts when the controller dies, and takes this process with it."""
        self._watch = ["--watch", str(pid)]

    def _stdin(self) -> IO[str]:
        # A forked worker (pytest-xdist uses execnet, not fork, but be safe) gets its own reaper.
        if self._popen is None or self._owner_pid != os.getpid() or self._popen.poll() is not None:
            self._popen = subprocess.Popen(
                [sys.executable, "-m", "pytest_rollout_chaos.servers.reaper", *self._watch],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
            self._owner_pid = os.getpid()
        assert self._popen.stdin is not None
        return self._popen.stdin

    def _send(self, line: str) -> None:
        with self._lock:
            try:
                stdin = self._stdin()
                stdin.write(line + "\n")
                stdin.flush()
            except (BrokenPipeError, OSError):
                _logger.warning("reaper unavailable; %r not registered", line)

    def add(self, pgid: int) -> None:
        self._send(f"add {pgid}")

    def remove(self, pgid: int) -> None:
        self._send(f"remove {pgid}")

    def add_path(self, path: Path) -> None:
        """Kill, with pytest, every process whose command line names ``path`` (in any group)."""
        self._send(f"add-path {path}")

    def remove_path(self, path: Path) -> None:
        self._send(f"remove-path {path}")

    def add_netns(self, name: str) -> None:
        """Kill, with pytest, every process in network namespace ``name``, then delete it."""
        self._send(f"add-netns {name}")

    def remove_netns(self, name: str) -> None:
        self._send(f"remove-netns {name}")

    def add_link(self, name: str) -> None:
        """Delete network link ``name`` (a bridge, a veth) when pytest ends, however it ends."""
        self._send(f"add-link {name}")

    def remove_link(self, name: str) -> None:
        self._send(f"remove-link {name}")

    def close(self) -> None:
        """End the reaper cleanly (nothing left to kill) when this process exits normally."""
        with self._lock:
            popen, self._popen = self._popen, None
            if popen is None or self._owner_pid != os.getpid():
                return
            with contextlib.suppress(OSError):
                assert popen.stdin is not None
                popen.stdin.close()
            try:
                popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


_REAPER = _Reaper()
atexit.register(_REAPER.close)


def reaper() -> _Reaper:
    """This process's reaper: a process group added to it dies with this process, however it ends."""
    return _REAPER
