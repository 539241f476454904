"""A worker process of the fault layer: ``python -m pytest_rollout_chaos.servers.faultlayer.worker --fd N``.

Started by the layer's main process (``workers``), with one end of a socket pair as ``--fd``.
It listens on every link's port beside the main process (``SO_REUSEPORT``), relays, decodes,
rewrites and records what reaches it into its own events file, and asks the main process for
every decision its state holds (``RemoteState``). It exits on SIGTERM, when the main process
goes away (its socket closes) and when its parent dies.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from typing import Any, Final

from pytest_rollout_chaos.history import EventWriter, flush_events
from pytest_rollout_chaos.servers.faultlayer import rewrite
from pytest_rollout_chaos.servers.faultlayer.channel import Channel, Message
from pytest_rollout_chaos.servers.faultlayer.downstream import Request
from pytest_rollout_chaos.servers.faultlayer.proxy import LinkPort
from pytest_rollout_chaos.servers.faultlayer.rows import SESSION_HEADER, assistant_texts
from pytest_rollout_chaos.servers.faultlayer.rules import Match, Rule
from pytest_rollout_chaos.servers.faultlayer.state import Link
from pytest_rollout_chaos.servers.serve import die_with_parent

HOLD_MARGIN_S: Final = 5.0  # a hold is bounded by the main process; this bounds the call beyond it

logger = logging.getLogger(__name__)


class RemoteState:
    """``state.Decisions`` answered by the main process: the one ``LayerState`` decides."""

    def __init__(self) -> None:
        self.channel: Channel | None = None
        self._writers: dict[str, EventWriter] = {}
        # what the main process tells (and waits until told back) when it changes: no rule armed
        # and no row known (then a request without _rowidx has no row and no rule counts it), and
        # the routes prefix_drift rules watch (only their answers' generations are asked for)
        self.quiet = True
        self.watched: list[tuple[str, Match]] = []

    def watches(self, server: str, path: str) -> bool:
        return any(server == watched and match.route_matches(path) for watched, match in self.watched)

    def writer(self, source: str) -> EventWriter:
        """The event writer for ``source`` (this worker's own events file)."""
        if source not in self._writers:
            self._writers[source] = EventWriter(source)
        return self._writers[source]

    async def arrive(self, link: Link, request: Request, document: Any) -> tuple[int | None, list[Rule]]:
        if self.quiet and not (isinstance(document, dict) and "_rowidx" in document):
            return None, []
        call = {
            "op": "arrive",
            "link": link.name,
            "path": request.path,
            "cookie": request.headers.get("Cookie"),
            "session": request.headers.get(SESSION_HEADER),
        }
        # the main process reads the same body (a row's prompt, its _rowidx) only if it is JSON
        answer = await self._call(call, request.body if document is not None else b"")
        fired = [
            Rule(
                id=rule["id"],
                server=rule["server"],
                effect=rule["effect"],
                match=Match(),
                params=rule["params"],
            )
            for rule in answer["fired"]
        ]
        return answer["row"], fired

    async def answered(
        self, link: Link, path: str, *, row: int | None, status: int, document: Any, set_cookies: list[str]
    ) -> None:
        learns = row is not None and status < 400
        texts = assistant_texts(document) if learns else []
        watched = document is not None and self.watches(link.server, path)
        if not watched and not (learns and (texts or set_cookies)):
            return  # nothing the row index or a rule could learn from it
        call = {
            "op": "answered",
            "link": link.name,
            "path": path,
            "row": row,
            "status": status,
            "texts": texts,
            "cookies": set_cookies if learns else [],
            "document": watched,
        }
        if (await self._call(call))["watch"]:
            found = rewrite.generations(document)
            await self._call({"op": "observe", "link": link.name, "path": path, "generations": found})

    async def memory(self, rule_id: str) -> list[list[int]]:
        return list((await self._call({"op": "memory", "rule": rule_id}))["memory"])

    async def hold(self, rule_id: str, max_s: float | None) -> None:
        # no max_hang_s: held until disarmed, or until the main process goes away (the call fails)
        deadline = None if max_s is None else max_s + HOLD_MARGIN_S
        await self._call({"op": "hold", "rule": rule_id, "max_s": max_s}, timeout_s=deadline)

    async def _call(self, message: Message, blob: bytes = b"", **deadline: float | None) -> Message:
        assert self.channel is not None, "the worker's channel is set before it listens"
        return await self.channel.call(message, blob, **deadline)


class _Worker:
    """The links this worker serves, as the main process tells it of them."""

    def __init__(self, state: RemoteState) -> None:
        self.state = state
        self.ports: list[tuple[asyncio.Server, LinkPort]] = []

    def handle(self, message: Message, _blob: bytes) -> Any:
        if message["op"] == "hello":
            return {"pid": os.getpid()}
        if message["op"] == "link":
            return self._listen(message)
        if message["op"] == "summary":
            self.state.quiet = bool(message["quiet"])
            self.state.watched = [(server, Match(route=route)) for server, route in message["watched"]]
            return {}
        raise ValueError(f"unknown call {message['op']!r}")

    async def _listen(self, message: Message) -> Message:
        link = Link(**{key: message[key] for key in ("name", "server", "source", "upstream", "listen")})
        port = LinkPort(self.state, link)
        host, _, number = link.listen.rpartition(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, int(number)))
        server = await asyncio.get_running_loop().create_server(port.protocol, sock=sock, backlog=1024)
        self.ports.append((server, port))
        return {}

    async def close(self) -> None:
        for server, port in self.ports:
            server.close()
            await port.close()
            await server.wait_closed()


async def _run(fd: int) -> None:
    state = RemoteState()
    worker = _Worker(state)
    state.channel = await Channel.over(socket.socket(fileno=fd), worker.handle)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    state.channel.gone.add_done_callback(lambda _: stop.set())
    try:  # until SIGTERM, or the main process goes away
        await stop.wait()
    finally:
        await worker.close()
        state.channel.close()
        flush_events()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=__doc__)
    parser.add_argument("--fd", type=int, required=True, help="this worker's end of the socket pair")
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stdout,
        level=os.environ.get("LOG_LEVEL", "WARNING").upper(),
        format=f"%(asctime)s %(levelname)s worker {os.getpid()} %(name)s: %(message)s",
    )
    die_with_parent()
    gc.freeze()  # as the main process does (``__main__``): the answers' containers churn the collector
    try:
        import uvloop
    except ImportError:
        asyncio.run(_run(args.fd))
    else:
        uvloop.run(_run(args.fd))


if __name__ == "__main__":
    main()
