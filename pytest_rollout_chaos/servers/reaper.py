"""The reaper: a tiny watchdog process that kills our server process groups if pytest dies.

pytest writes ``add PGID`` / ``remove PGID`` lines to the reaper's stdin, and ``add-path DIR`` /
``remove-path DIR`` for processes that leave every group of ours (Ray's workers start their own
sessions; each names the cluster's temp dir on its command line). ``add-netns NAME`` and
``add-link NAME`` (and their ``remove-``) name the network namespaces and links of
``--rollout-chaos-ray=hosts:N`` (``ray.netns``). When that pipe reaches end-of-file, pytest is
gone (normal exit, crash, or SIGKILL: the kernel closes the pipe in every case), and the reaper
SIGKILLs every group still registered, then every process whose command line names a registered
directory, then every process in a registered namespace; it deletes the namespaces (their
``/run/netns`` mounts and the veths inside go with them), then the links. This is the
Ryuk idea from testcontainers without a container; it also covers grandchildren that
``PR_SET_PDEATHSIG`` would miss, because it kills whole process groups.

Under pytest-xdist the servers belong to the workers, and a worker outlives a SIGKILLed
controller by seconds (until it notices its channel is gone). So a worker's reaper is also
given the controller's pid (``--watch PID``) and watches it through a pidfd, which wakes it the
moment the controller exits: it then kills what is registered and the worker that started it,
so the whole tree is gone at once rather than when each worker finds out.

Run as ``python -m pytest_rollout_chaos.servers.reaper [--watch PID]``; it starts in its own
session so a Ctrl-C at the terminal does not take it down before pytest has cleaned up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import selectors
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

_POLL_S: Final = 0.1  # how often a controller is polled where no pidfd can be had
_IP_TIMEOUT_S: Final = 5.0
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,15}")


class _Registry:
    """The groups and paths pytest registered, from the lines it wrote."""

    def __init__(self) -> None:
        self.groups: set[int] = set()
        self.paths: set[str] = set()
        self.netns: set[str] = set()
        self.links: set[str] = set()
        self._partial = b""

    def feed(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            verb, _, value = line.decode(errors="replace").strip().partition(" ")
            action, _, what = verb.partition("-")
            if action not in ("add", "remove"):
                continue
            names = {"path": self.paths, "netns": self.netns, "link": self.links}.get(what)
            if names is not None and _valid(what, value):
                (names.add if action == "add" else names.discard)(value)
            elif not what and value.isdigit():
                (self.groups.add if action == "add" else self.groups.discard)(int(value))


def _valid(what: str, value: str) -> bool:
    """A path is absolute; a namespace or link name is one word of at most 15 safe characters."""
    if what == "path":
        return value.startswith("/")
    return bool(_NAME.fullmatch(value))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_rollout_chaos.servers.reaper")
    parser.add_argument("--watch", type=int, help="also reap, and kill the owner, when this process exits")
    args = parser.parse_args(argv)
    owner = os.getppid()
    registry = _Registry()
    controller_gone = _watch(registry, args.watch)
    for group in registry.groups:
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.killpg(group, sig)
            except (ProcessLookupError, PermissionError):
                break
    for pid in naming(registry.paths):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    remove_network(registry.netns, registry.links)
    if controller_gone and owner > 1:  # the worker would linger until it notices on its own
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(owner, signal.SIGKILL)
    return 0


def _watch(registry: _Registry, controller: int | None) -> bool:
    """Read registrations until the pipe ends (False) or ``controller`` exits (True)."""
    pidfd = _pidfd(controller) if controller is not None else None
    if controller is not None and pidfd is None and not _alive(controller):
        return True
    with selectors.DefaultSelector() as selector:
        selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "pipe")
        if pidfd is not None:
            selector.register(pidfd, selectors.EVENT_READ, "controller")
        polling = controller is not None and pidfd is None
        while True:
            for key, _ in selector.select(timeout=_POLL_S if polling else None):
                if key.data == "controller":
                    return True
                data = os.read(key.fd, 65536)
                if not data:
                    return False
                registry.feed(data)
            if polling and controller is not None and not _alive(controller):
                return True


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here, or the process is gone already
        return None


def _alive(pid: int) -> bool:
    """Is ``pid`` running (a zombie, exited but not yet reaped by its parent, is not)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def remove_network(netns: set[str], links: set[str]) -> None:
    """Kill every process in each of ``netns``, delete them, then delete ``links`` (none may exist)."""
    for name in sorted(netns):
        for _ in range(5):
            pids = _ip_output("netns", "pids", name).split()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        _ip_output("netns", "del", name)
    for name in sorted(links):
        _ip_output("link", "del", name)


def _ip_output(*args: str) -> str:
    try:
        return subprocess.run(
            ["ip", *args], capture_output=True, text=True, timeout=_IP_TIMEOUT_S, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def naming(paths: set[str]) -> list[int]:
    """Every process but this one whose command line mentions one of ``paths``."""
    if not paths:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(path in command for path in paths):
            found.append(int(entry.name))
    return found


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(main())
