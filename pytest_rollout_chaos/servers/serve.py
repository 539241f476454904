"""The child side of the supervisor: run one aiohttp app on its address and report the bound port.

Every server of ours (policy, Gym servers, embedded Toxiproxy, test servers) ends its
``main()`` with ``serve(app, host, port)``. It binds (port 0 means: let the OS choose),
writes ``{"host", "port", "pid"}`` atomically to the ready file named by the supervisor,
stops cleanly on SIGTERM/SIGINT, and exits when its parent dies (a second line behind the
session reaper). Events the server buffered are written before each answer leaves and before
it exits, so a reader that got an answer can read what was recorded before it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from pytest_rollout_chaos.history import flush_events
from pytest_rollout_chaos.servers import procfs
from pytest_rollout_chaos.servers.process import (
    HOST_ENV,
    PORT_ENV,
    READY_DELAY_ENV,
    READY_FILE_ENV,
    SUPERVISOR_PID_ENV,
)


def die_with_parent(poll_s: float = 0.2) -> None:
    """Exit when the parent process dies: a daemon thread watches ``getppid`` change.

    Not ``PR_SET_PDEATHSIG``: the kernel ties that to the parent *thread*, and the supervisor
    may start (or restart) a server from a worker thread that ends long before pytest does.
    The session reaper is the first line; this is the second. A supervisor that died while this
    process was still importing (seconds, for torch) left it adopted before it could look: the
    supervisor's pid, from ``SUPERVISOR_PID_ENV``, tells that apart from a program in between
    (a launcher that forks), and such an orphan exits at once instead of watching its adopter.
    """
    parent = os.getppid()
    supervisor = os.environ.pop(SUPERVISOR_PID_ENV, "")
    if supervisor.isdigit() and int(supervisor) != parent and not procfs.alive(int(supervisor)):
        flush_events()
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        flush_events()
        os._exit(1)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def write_ready_file(host: str, port: int) -> None:
    """Report where we listen to the supervisor, atomically (write, then rename)."""
    target = os.environ.get(READY_FILE_ENV)
    if not target:
        return
    path = Path(target)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps({"host": host, "port": port, "pid": os.getpid()}))
    partial.replace(path)


def serve(
    app: web.Application,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    on_started: Callable[[str, int], Awaitable[None]] | None = None,
    relay: bool = False,
) -> None:
    """Run ``app`` until SIGTERM or SIGINT; print and report the bound address.

    ``relay``: the server sits on every link (embedded Toxiproxy, the fault layer), so its
    per-request cost is on every request of the stack; it runs on uvloop where that is installed.

    ``PORT_ENV``, when set (a restart by the supervisor), wins over ``port`` so the server
    comes back where proxies point; ``HOST_ENV`` (a Ray host: its node's address) wins over
    ``host``; ``READY_DELAY_ENV`` delays listening. All are removed so our own children do not
    inherit them.
    """
    restart_port = os.environ.pop(PORT_ENV, None)
    if restart_port:
        port = int(restart_port)
    host = os.environ.pop(HOST_ENV, "") or host
    die_with_parent()
    ready_delay_s = float(os.environ.pop(READY_DELAY_ENV, "0") or 0)
    if ready_delay_s > 0:  # not listening yet: clients are refused, as while a model loads
        print(f"waiting {ready_delay_s:g}s before listening", flush=True)
        time.sleep(ready_delay_s)
    with asyncio.Runner(loop_factory=_relay_loop_factory() if relay else None) as runner:
        runner.run(_serve(app, host, port, on_started))


def _relay_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _serve(
    app: web.Application,
    host: str,
    port: int,
    on_started: Callable[[str, int], Awaitable[None]] | None,
) -> None:
    app.on_response_prepare.append(_flush_before_answer)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    # Bind the socket ourselves: port 0 lets the OS choose, and we can read what it chose.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = int(sock.getsockname()[1])
    site = web.SockSite(runner, sock)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if on_started is not None:
        await on_started(host, bound_port)
    write_ready_file(host, bound_port)
    print(f"listening on http://{host}:{bound_port}", flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


async def _flush_before_answer(_request: web.Request, _response: web.StreamResponse) -> None:
    flush_events()
