"""ManagedProcess: one server child, its own process group, its log, its readiness and its end.

Every process this plugin starts goes through here (xprocess and testcontainers are the
models). A child:
- runs in a new session (own process group), so terminal signals do not reach it and the
  whole tree can be signalled at once;
- writes stdout and stderr to ``<log_dir>/<name>.log``;
- is registered with the session reaper (``reaper_client``), which kills its group if pytest
  itself dies;
- is stopped with SIGTERM to the group, a bounded wait, then SIGKILL (SIGCONT in between so a
  frozen child can act on SIGTERM);
- reports its port through a ready file when it binds port 0 (``READY_FILE_ENV``), so ports
  come from the OS and are never guessed.

Any exit that nobody asked for, including exit code 0, is a crash: ``ensure_running`` raises
``ServerCrashedError`` and ``on_exit`` listeners hear about it at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from pytest_rollout_chaos.errors import ServerCrashedError, ServerStartError
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.reaper_client import reaper

READY_FILE_ENV: Final = "ROLLOUT_CHAOS_READY_FILE"
READY_DELAY_ENV: Final = "ROLLOUT_CHAOS_READY_DELAY_S"
RUN_ID_ENV: Final = "ROLLOUT_CHAOS_RUN_ID"
PORT_ENV: Final = "ROLLOUT_CHAOS_PORT"  # set by restart(): bind this port again, not port 0
HOST_ENV: Final = "ROLLOUT_CHAOS_HOST"  # set by a Ray host: bind its node's address, not the one asked
SUPERVISOR_PID_ENV: Final = "ROLLOUT_CHAOS_SUPERVISOR_PID"  # set by start(): the process that spawned it
LOG_TAIL_LINES: Final = 40

_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """Everything needed to start one server; data only, no lifecycle code."""

    name: str
    argv: tuple[str, ...]
    probe: readiness.Probe
    env: Mapping[str, str] = field(default_factory=dict)
    port: int | None = None  # fixed port for programs that cannot bind 0 and report it
    host: str = "127.0.0.1"
    ready_timeout_s: float = 60.0
    stop_timeout_s: float = 5.0
    hint: str = ""
    cwd: Path | None = None
    gpus: int = 0  # CUDA devices a scheduler (Ray) must give it; here it sees what this process sees
    # files it reads (its config), written before it starts by whoever starts it, on its machine
    files: Mapping[Path, str] = field(default_factory=dict)


ExitListener = Callable[["ManagedProcess", int], None]


class ManagedProcess:
    """A started server child; see the module docstring for the contract."""

    def __init__(self, spec: ServerSpec, log_dir: Path, *, run_id: str = "") -> None:
        self.spec = spec
        self._log_dir = log_dir
        self._run_id = run_id
        self._popen: subprocess.Popen[bytes] | None = None
        self._log_file: TextIO | None = None
        self._address: tuple[str, int] | None = (spec.host, spec.port) if spec.port is not None else None
        self._expected_exit = False
        self._listeners: list[ExitListener] = []
        self._waiter: threading.Thread | None = None
        self._restart_env: dict[str, str] = {}
        self.started_at: float | None = None
        self.ready_after_s: float | None = None

    # -- ProbeTarget --------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def log_path(self) -> Path:
        return self._log_dir / f"{self.spec.name}.log"

    @property
    def ready_file(self) -> Path:
        return self._log_dir / f"{self.spec.name}.ready.json"

    def address(self) -> tuple[str, int] | None:
        if self._address is None and self.ready_file.exists():
            try:
                info = json.loads(self.ready_file.read_text())
                self._address = (str(info["host"]), int(info["port"]))
            except (ValueError, KeyError):
                return None  # written half-way; the writer renames atomically, so rare
        return self._address

    # -- state ----------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        if self._popen is None:
            raise RuntimeError(f"server {self.name!r} was never started")
        return self._popen.pid

    @property
    def url(self) -> str:
        address = self.address()
        if address is None:
            raise RuntimeError(f"server {self.name!r} has no address yet")
        return f"http://{address[0]}:{address[1]}"

    def exit_code(self) -> int | None:
        return None if self._popen is None else self._popen.poll()

    def is_running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def node(self) -> str | None:
        """The cluster node the server runs on, when it runs on one (a Ray actor's); None: here."""
        return None

    @property
    def here(self) -> bool:
        """Whether the server runs on this machine, where ``/proc`` and ``killpg`` reach it."""
        return True

    def add_exit_listener(self, listener: ExitListener) -> None:
        """Call ``listener(process, code)`` from a background thread when the child exits."""
        self._listeners.append(listener)

    def expect_exit(self) -> None:
        """Mark the next exit as intended (a stop, or a fault that kills on purpose)."""
        self._expected_exit = True

    def ensure_running(self) -> None:
        """Raise ``ServerCrashedError`` if the child has exited without being asked to."""
        code = self.exit_code()
        if code is not None and not self._expected_exit:
            raise ServerCrashedError(
                f"server {self.name!r} exited with code {code} while still needed"
                f"{' (exit code 0 counts as a crash)' if code == 0 else ''}\n"
                f"command: {self.command_line()}\n"
                f"last {LOG_TAIL_LINES} log lines ({self.log_path}):\n{self.log_tail()}"
            )

    def command_line(self) -> str:
        return shlex.join(self.spec.argv)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log written)"
        tail = text.splitlines()[-lines:]
        return "\n".join(tail) if tail else "(log is empty)"

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Spawn the child and wait until it is ready; on any failure stop it and raise."""
        if self._popen is not None:
            raise RuntimeError(f"server {self.name!r} was already started")
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.ready_file.unlink()
        for path, text in self.spec.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        env = {
            **os.environ,
            **self.spec.env,
            **self._restart_env,
            READY_FILE_ENV: str(self.ready_file),
            SUPERVISOR_PID_ENV: str(os.getpid()),
        }
        if self._run_id:
            env[RUN_ID_ENV] = self._run_id
        self._log_file = self.log_path.open("a", encoding="utf-8")
        self._log_file.write(f"--- {time.strftime('%H:%M:%S')} start: {self.command_line()}\n")
        self._log_file.flush()
        try:
            self._popen = subprocess.Popen(
                self.spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.spec.cwd,
                start_new_session=True,
            )
        except OSError as error:
            self._close_log()
            raise ServerStartError(
                f"server {self.name!r} could not be started: {error}\n"
                f"command: {self.command_line()}\nhint: {self.spec.hint or 'is the program installed?'}"
            ) from error
        self.started_at = time.monotonic()
        reaper().add(self._popen.pid)
        self._waiter = threading.Thread(
            target=self._wait_for_exit, name=f"exit-watch-{self.name}", daemon=True
        )
        self._waiter.start()
        try:
            self.ready_after_s = readiness.wait_until(
                lambda: self.spec.probe(self),
                timeout_s=self.spec.ready_timeout_s,
                exit_code=self.exit_code,
            )
        except readiness.NotReady as not_ready:
            self.expect_exit()
            self.stop()
            raise ServerStartError(self._start_failure_text(not_ready)) from None
        except BaseException:
            self.expect_exit()
            self.stop()
            raise

    def stop(self) -> int | None:
        """Stop the whole process group (TERM, bounded wait, KILL); idempotent; return the code."""
        popen = self._popen
        if popen is None:
            return None
        self._expected_exit = True
        if popen.poll() is None:
            self.signal(signal.SIGTERM)
            self.signal(signal.SIGCONT)
            try:
                popen.wait(timeout=self.spec.stop_timeout_s)
            except subprocess.TimeoutExpired:
                _logger.warning(
                    "server %r ignored SIGTERM for %.1fs; killing", self.name, self.spec.stop_timeout_s
                )
        # The leader may be gone while other members of its group live on: kill the group.
        self.signal(signal.SIGKILL)
        code = popen.wait()
        if self._waiter is not None:
            self._waiter.join(timeout=1.0)
        reaper().remove(popen.pid)
        self._close_log()
        return code

    def restart(self, *, ready_delay_s: float = 0.0) -> None:
        """Stop (if still running) and start again on the same port, so proxies keep working.

        The child learns the port from ``PORT_ENV`` (``serve.serve`` honours it). Exit
        listeners stay registered and hear about the new child's exit too. ``ready_delay_s``
        makes one of our servers wait that long before it listens, as a model server does
        while it loads (``READY_DELAY_ENV``).
        """
        address = self.address()
        self.stop()
        self._popen = None
        self._expected_exit = False
        self._address = (self.spec.host, self.spec.port) if self.spec.port is not None else None
        self._restart_env = {}
        if address is not None and self.spec.port is None:
            self._restart_env[PORT_ENV] = str(address[1])
        if ready_delay_s > 0:
            self._restart_env[READY_DELAY_ENV] = str(ready_delay_s)
        self.start()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group (no-op once it is gone)."""
        if self._popen is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, sig)

    def _wait_for_exit(self) -> None:
        assert self._popen is not None
        self._tell_exit_listeners(self._popen.wait())

    def _tell_exit_listeners(self, code: int) -> None:
        for listener in list(self._listeners):
            try:
                listener(self, code)
            except Exception:  # a listener must never take the watcher down
                _logger.exception("exit listener of %r failed", self.name)

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _start_failure_text(self, not_ready: readiness.NotReady) -> str:
        if not_ready.reason == "exited":
            what = (
                f"server {self.name!r} exited with code {not_ready.exit_code} after "
                f"{not_ready.elapsed_s:.1f}s, before it was ready"
            )
            if not_ready.exit_code == 0:
                what += " (exit code 0 counts as a crash: it was needed)"
        else:
            what = (
                f"server {self.name!r} was not ready after {not_ready.elapsed_s:.1f}s "
                f"(limit {self.spec.ready_timeout_s:.1f}s); it was killed"
            )
        lines = [
            what,
            f"command: {self.command_line()}",
            f"waiting for: {readiness.describe(self.spec.probe)}",
        ]
        if not_ready.last_error:
            lines.append(f"last probe error: {not_ready.last_error}")
        lines += [f"last {LOG_TAIL_LINES} log lines ({self.log_path}):", self.log_tail()]
        lines.append(f"hint: {self.spec.hint or 'run the command by hand and read its output'}")
        return "\n".join(lines)


def stop_group(child: subprocess.Popen[Any], *, grace_s: float) -> None:
    """End a child started with its own process group (a child pytest session, say), and whatever
    it left in that group: SIGTERM so it can tear its stack down, SIGKILL after ``grace_s``; a child
    already done still has its group killed."""
    if child.poll() is None:
        _signal_group(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(child.pid, signal.SIGKILL)
            child.wait(timeout=grace_s)
    else:
        _signal_group(child.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
