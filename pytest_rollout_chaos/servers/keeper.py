"""ProcessKeeper: the owner of every server a run starts, with no runner in it.

Every process goes on one ``ExitStack`` as it starts and is stopped, newest first, by ``close``
(and by leaving the ``with`` block, on every path, Ctrl-C included); a stop that fails is logged,
never allowed to mask the run's own outcome. pytest's session harness is one (it adds the
hooks); ``builder.open_stack`` opens one of its own for a run outside pytest.

Starting the servers takes seconds (minutes with vLLM), so a keeper given somewhere to ``tell``
says once that they are starting and then, per server, that it is ready and how long it took:
pytest's terminal for the harness, stderr for ``rollout-chaos run``, the same lines from here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Final

from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec

_logger = logging.getLogger(__name__)

STARTING_LINE: Final = (
    "rollout-chaos: starting the servers (once per run; the first test or scenario to need them waits)"
)
READY_LINE: Final = "rollout-chaos: {name} ready in {took_s:.1f}s"


class ProcessKeeper:
    """Starts servers, keeps them, stops them all on ``close``; names their logs and the run."""

    def __init__(self, log_dir: Path | None = None, *, tell: Callable[[str], None] | None = None) -> None:
        """``tell`` gets the progress lines as servers start (from any thread, one at a time)."""
        self.run_id = uuid.uuid4().hex[:12]
        self._exit_stack = contextlib.ExitStack()
        self._processes: list[ManagedProcess] = []
        self._log_dir = log_dir
        self.summary_lines: list[str] = []  # what was started, for the run's header or summary
        self.started_s: dict[str, float] = {}  # how long each server took to be ready, by name
        self._tell = tell
        self._tell_lock = threading.Lock()
        self._told_starting = False

    def set_log_dir(self, path: Path) -> None:
        if self._log_dir is None:
            self._log_dir = path

    @property
    def log_dir(self) -> Path:
        if self._log_dir is None:
            raise RuntimeError("no log directory yet (pytest: use the chaos_harness fixture)")
        return self._log_dir

    @property
    def processes(self) -> tuple[ManagedProcess, ...]:
        return tuple(self._processes)

    def start(self, spec: ServerSpec) -> ManagedProcess:
        """Start ``spec`` and keep it until ``close``."""
        return self.adopt(ManagedProcess(spec, self.log_dir, run_id=self.run_id))

    def adopt(self, process: ManagedProcess) -> ManagedProcess:
        """Start a process built elsewhere (a server hosted by a Ray actor) and keep it like ``start``'s."""
        self._exit_stack.callback(self._stop_quietly, process)
        self.starting(process)
        began = time.perf_counter()
        process.start()
        self.started_s[process.name] = time.perf_counter() - began
        self._processes.append(process)
        self.ready(process, self.started_s[process.name])
        return process

    def starting(self, process: ManagedProcess) -> None:
        """Before each server starts (maybe from another thread): the first says the stack starts."""
        with self._tell_lock:
            first, self._told_starting = not self._told_starting, True
            if first and self._tell is not None:
                self._tell(STARTING_LINE)

    def ready(self, process: ManagedProcess, took_s: float) -> None:
        """Once each server is ready (maybe from another thread), with how long it took."""
        with self._tell_lock:
            if self._tell is not None:
                self._tell(READY_LINE.format(name=process.name, took_s=took_s))

    def defer(self, close: Callable[[], None]) -> None:
        """Run ``close`` on ``close()``, after everything started later is stopped (a Ray cluster)."""
        self._exit_stack.callback(close)

    def close(self) -> None:
        """Stop everything started, newest first; idempotent."""
        self._exit_stack.close()

    def __enter__(self) -> ProcessKeeper:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    @staticmethod
    def _stop_quietly(process: ManagedProcess) -> None:
        try:
            process.stop()
        except Exception:  # cleanup must not mask the run's own outcome
            _logger.exception("stopping server %r failed", process.name)
