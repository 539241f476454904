"""Entry point of the fault layer: ``python -m pytest_rollout_chaos.servers.faultlayer --port 0``.

Serves the control API (port 0: the OS chooses; the port goes to the supervisor's ready file).
Links, rules and rows are added through the API; events go to ``$ROLLOUT_CHAOS_EVENTS_FILE``.
``--processes N`` runs the layer as N processes, this one and N - 1 workers (``workers``).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Sequence

from pytest_rollout_chaos.servers.faultlayer.api import build_app
from pytest_rollout_chaos.servers.serve import serve


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_rollout_chaos.servers.faultlayer",
        description="HTTP fault layer: records and rewrites the traffic of every link of the stack.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="control API host (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="control API port; 0 = any free port")
    parser.add_argument(
        "--processes", type=int, default=1, help="processes serving the links, this one included (default: 1)"
    )
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error(f"--processes: expected 1 or more, got {args.processes}")
    logging.basicConfig(
        stream=sys.stdout,
        level=os.environ.get("LOG_LEVEL", "WARNING").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    app = build_app(processes=args.processes)
    # What the interpreter holds by now (modules, classes, aiohttp) lives as long as the process:
    # out of the collector's sight. The layer builds some 10,000 containers for each 256 KB answer
    # it decodes, so the collector runs often, and each full collection walked all of it: about
    # 2 ms of the 5 ms such an answer cost the layer.
    gc.freeze()
    serve(app, host=args.host, port=args.port, relay=True)


if __name__ == "__main__":
    main()
