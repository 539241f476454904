"""The reaper: a tiny watchdog process that kills our server process groups if pytest dies.

pytest writes ``add PGID`` / ``remove PGID`` lines to the reaper's stdin, and ``add-path DIR`` /
``remove-path DIR`` for processes that leave every group of ours (Ray's workers start their own
sessions; each names the cluster's temp dir on its command line). When that pipe reaches
end-of-file, pytest is gone (normal exit, crash, or SIGKILL: the kernel closes the pipe in every
case), and the reaper SIGKILLs every group still registered, then every process whose command
line names a registered directory. This is the
Ryuk idea from testcontainers without a container; it also covers grandchildren that
``PR_SET_PDEATHSIG`` would miss, because it kills whole process groups.

Run as ``python -m pytest_rollout_chaos.servers.reaper``; it starts in its own session so a
Ctrl-C at the terminal does not take it down before pytest has cleaned up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path


def main() -> int:
    groups: set[int] = set()
    paths: set[str] = set()
    for line in sys.stdin:
        verb, _, value = line.strip().partition(" ")
        if verb in ("add-path", "remove-path") and value.startswith("/"):
            (paths.add if verb == "add-path" else paths.discard)(value)
        elif value.isdigit() and verb in ("add", "remove"):
            (groups.add if verb == "add" else groups.discard)(int(value))
    for group in groups:
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.killpg(group, sig)
            except (ProcessLookupError, PermissionError):
                break
    for pid in naming(paths):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return 0


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
