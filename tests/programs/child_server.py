"""A small real server program for supervisor tests.

Modes: ``ready`` serves ``/health`` through ``serve.serve`` (port 0, ready file); ``exit`` prints a
few lines and exits with ``--code``; ``never`` runs but never becomes ready; ``ready`` with
``--grandchild`` also starts a sleeping grandchild in its process group, to prove group teardown.
Every mode writes its pid (and the grandchild's) to ``--pid-file`` when given.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from aiohttp import web

from pytest_rollout_chaos.servers.serve import die_with_parent, serve


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("ready", "exit", "never"), default="ready")
    parser.add_argument("--code", type=int, default=3)
    parser.add_argument("--delay-s", type=float, default=0.0)
    parser.add_argument("--pid-file", type=Path)
    parser.add_argument("--grandchild", action="store_true")
    args = parser.parse_args()
    pids = [str(os.getpid())]
    if args.grandchild:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pids.append(str(child.pid))
    if args.pid_file is not None:
        args.pid_file.write_text(" ".join(pids))
    print(f"child_server mode={args.mode}", flush=True)
    time.sleep(args.delay_s)
    if args.mode == "exit":
        print("about to exit: simulated startup failure", flush=True)
        return int(args.code)
    if args.mode == "never":
        die_with_parent()
        time.sleep(600)
        return 0
    app = web.Application()
    app.router.add_get("/health", _health)
    serve(app)
    return 0


if __name__ == "__main__":
    sys.exit(main())
