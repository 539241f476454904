"""Targets for the process faults that import nothing of ours, and the kernel's own log as a witness.

``PLAIN_SERVER`` is a standard-library HTTP server that serves on its main thread only (a
SIGINT that lands while a request thread starts makes Python exit 1, not die of the signal). It
follows the supervisor's conventions through the environment only (report the port in the ready
file, bind the port given on restart). Its first argument says what it does on SIGINT and
SIGTERM: ``graceful`` stops serving and exits 0, ``default`` leaves Python's defaults (SIGTERM
kills it; SIGINT raises KeyboardInterrupt, which ends it as killed by SIGINT), ``ignore`` ignores
them, ``fails`` stops and exits 3. Its second argument is ballast in MiB, touched, so it holds
that much memory, as a loaded model server does; its third is a child (same process group) that
holds that many MiB. ``GET /`` answers ``{"pid", "child"}``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

from pytest_rollout_chaos.faults import _cgroup
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec

PLAIN_SERVER = textwrap.dedent(
    """
    import http.server, json, os, signal, subprocess, sys, threading

    mode, ballast_mib, child_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ballast = bytearray(ballast_mib << 20)
    for index in range(0, len(ballast), 4096):
        ballast[index] = 1
    child = None
    if child_mib:  # a helper in the same process group, holding more memory than the server
        hold = f"b = bytearray({child_mib} << 20); b[::4096] = b'x' * len(b[::4096]); print(1, flush=True)"
        hold += "; input()"
        child = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        child.stdout.readline()


    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"pid": os.getpid(), "child": child.pid if child else None}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass


    port = int(os.environ.get("ROLLOUT_CHAOS_PORT", "0"))
    # one thread: a signal that lands while a handler thread starts ends Python with status 1
    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        if mode in ("graceful", "fails"):
            signal.signal(stop_signal, lambda *_: threading.Thread(target=server.shutdown).start())
        elif mode == "ignore":
            signal.signal(stop_signal, signal.SIG_IGN)
    ready = os.environ.get("ROLLOUT_CHAOS_READY_FILE")
    if ready:
        with open(ready + ".partial", "w") as out:
            json.dump({"host": "127.0.0.1", "port": server.server_address[1], "pid": os.getpid()}, out)
        os.replace(ready + ".partial", ready)
    print(f"plain server ({mode}) on port {server.server_address[1]}", flush=True)
    server.serve_forever()
    server.server_close()
    print("plain server stopped", flush=True)
    sys.exit(3 if mode == "fails" else 0)
    """
)


def plain_server(
    directory: Path, mode: str = "graceful", *, ballast_mib: int = 0, child_mib: int = 0
) -> ManagedProcess:
    """A started ``PLAIN_SERVER`` named ``plain``; the caller stops it."""
    program = directory / "plain_server.py"
    program.write_text(PLAIN_SERVER)
    spec = ServerSpec(
        name="plain",
        argv=(sys.executable, str(program), mode, str(ballast_mib), str(child_mib)),
        probe=readiness.all_of(readiness.address_known(), readiness.http_ok("/")),
        ready_timeout_s=30.0,
        stop_timeout_s=2.0,
    )
    process = ManagedProcess(spec, directory / "logs")
    process.start()
    return process


def get_json(process: ManagedProcess) -> dict[str, Any]:
    """``GET /`` of a running plain server."""
    with urllib.request.urlopen(f"{process.url}/", timeout=5) as answer:
        data: dict[str, Any] = json.load(answer)
    return data


def cage_refused() -> str | None:
    """None when this machine lets us make a memory cage, else why not."""
    try:
        cage = _cgroup.create_cage(os.getpid(), f"rollout-chaos-probe-{os.getpid()}", 1 << 30)
    except _cgroup.CgroupUnavailable as why:
        return str(why)
    cage.remove()
    return None


class KernelLog:
    """The kernel log's records from the moment of ``open`` on (``/dev/kmsg``)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls) -> KernelLog | None:
        """None where the kernel log cannot be read (no permission, no device)."""
        try:
            fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        os.lseek(fd, 0, os.SEEK_END)
        return cls(fd)

    def messages(self) -> list[str]:
        """The messages logged since ``open`` (or the last call), without their prefixes."""
        found: list[str] = []
        while True:
            try:
                record = os.read(self._fd, 8192)
            except BlockingIOError:
                return found
            except BrokenPipeError:  # records were overwritten while we read: go on
                continue
            message = record.decode(errors="replace").partition(";")[2]
            found.append(message.split("\n", 1)[0])

    def close(self) -> None:
        os.close(self._fd)


def oom_victims(messages: list[str]) -> list[int]:
    """The pids the kernel's memory-cgroup OOM killer killed, in the order it logged them."""
    return [
        int(match.group(1))
        for line in messages
        if "Memory cgroup out of memory" in line and (match := re.search(r"Killed process (\d+) ", line))
    ]
