"""Entry point of the embedded Toxiproxy-compatible server, with the real server's flags.

``python -m pytest_rollout_chaos.servers.toxiproxy -host 127.0.0.1 -port 0 -config FILE -seed N``
serves the API (port 0: the OS chooses; the port goes to the supervisor's ready file), creates
the proxies of the ``-config`` JSON list at start, and logs every connection and toxic change.
Unlike the real server, a bad ``-config`` file stops the start with a clear message, and
``-seed`` (else env ``ROLLOUT_CHAOS_SEED``, else 0) really seeds jitter, slicing and toxicity.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from aiohttp import web

from pytest_rollout_chaos.history import EventWriter
from pytest_rollout_chaos.servers.serve import serve
from pytest_rollout_chaos.servers.toxiproxy import VERSION
from pytest_rollout_chaos.servers.toxiproxy.api import build_app
from pytest_rollout_chaos.servers.toxiproxy.collection import ProxyCollection
from pytest_rollout_chaos.servers.toxiproxy.errors import ApiError

SEED_ENV: Final = "ROLLOUT_CHAOS_SEED"
EVENT_SOURCE: Final = "toxiproxy"

_logger = logging.getLogger("toxiproxy")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_rollout_chaos.servers.toxiproxy",
        description="Embedded Toxiproxy-compatible server (Toxiproxy 2.x REST API and toxics).",
    )
    parser.add_argument("-host", "--host", default="127.0.0.1", help="API host (default: 127.0.0.1)")
    parser.add_argument("-port", "--port", type=int, default=8474, help="API port; 0 = any free port")
    parser.add_argument("-config", "--config", default="", help="JSON list of proxies to create at start")
    parser.add_argument(
        "-seed", "--seed", type=int, default=None, help=f"random seed (default: ${SEED_ENV} or 0)"
    )
    parser.add_argument("-version", "--version", action="store_true", help="print the version and exit")
    return parser.parse_args(argv)


def _seed(value: int | None) -> int:
    if value is not None:
        return value
    text = os.environ.get(SEED_ENV, "0")
    try:
        return int(text)
    except ValueError:
        sys.exit(f"toxiproxy: ${SEED_ENV}={text!r} is not an integer")


def _load_config(path: str) -> object:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        sys.exit(f"toxiproxy: cannot read -config {path!r}: {error}")
    except ValueError as error:
        sys.exit(f"toxiproxy: -config {path!r} is not valid JSON: {error}")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.version:
        print(VERSION)
        return
    logging.basicConfig(
        stream=sys.stdout,
        level=os.environ.get("LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    events = EventWriter(EVENT_SOURCE)
    seed = _seed(args.seed)
    collection = ProxyCollection(seed=seed, record=lambda op, data: events.emit("info", op, data))
    app = build_app(collection)
    config = _load_config(args.config) if args.config else None

    async def populate_from_config(_app: web.Application) -> None:
        if config is None:
            return
        try:
            proxies = await collection.populate(config)
        except ApiError as error:
            _logger.error("-config %s: %s", args.config, error.message)  # noqa: TRY400 - no traceback wanted
            raise SystemExit(f"toxiproxy: -config {args.config!r}: {error.message}") from None
        _logger.info("populated %d proxies from %s", len(proxies), args.config)

    app.on_startup.append(populate_from_config)
    _logger.info(
        "starting Toxiproxy-compatible API %s on %s:%d (seed %d)", VERSION, args.host, args.port, seed
    )
    serve(app, host=args.host, port=args.port, relay=True)


if __name__ == "__main__":
    main()
