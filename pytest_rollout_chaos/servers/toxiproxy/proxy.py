"""One proxy: a listener on ``listen``, and for each client a connection pair to ``upstream``.

Disabling closes the listener (new clients get connection refused) and every open connection,
as Toxiproxy does; enabling listens again on the same address. Listen port 0 takes a port
from the OS, and ``listen`` then shows the real one. Toxics apply to open connections too.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections.abc import Callable

from pytest_rollout_chaos.servers.toxiproxy.endpoint import Endpoint
from pytest_rollout_chaos.servers.toxiproxy.errors import ApiError
from pytest_rollout_chaos.servers.toxiproxy.link import Link
from pytest_rollout_chaos.servers.toxiproxy.toxics import STREAMS, ToxicSpec

UPSTREAM_CONNECT_TIMEOUT_S = 10.0

_logger = logging.getLogger("toxiproxy.proxy")


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port); an empty host means 127.0.0.1."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ApiError(f"invalid address {address!r} (valid: HOST:PORT, e.g. 127.0.0.1:0)", 400)
    return host.strip("[]") or "127.0.0.1", int(port_text)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Connection:
    """A client and its upstream socket, joined by an upstream and a downstream link."""

    def __init__(self, proxy: Proxy, client: Endpoint, upstream: Endpoint) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        peer = client.peer()
        self.name = join_address(*peer) if peer else "?"
        self.opened_at = time.monotonic()
        self.links = {
            "upstream": Link(
                f"{proxy.name}/{self.name}/upstream",
                source=client,
                dest=upstream,
                toxics=proxy.toxics_of("upstream"),
                rng=proxy.rng,
                on_close=self._link_closed,
            ),
            "downstream": Link(
                f"{proxy.name}/{self.name}/downstream",
                source=upstream,
                dest=client,
                toxics=proxy.toxics_of("downstream"),
                rng=proxy.rng,
                on_close=self._link_closed,
            ),
        }
        self._closed_links = 0
        self.done = False

    def start(self) -> None:
        for link in self.links.values():
            link.start()

    def _link_closed(self, link: Link, reset: bool) -> None:
        # Like Toxiproxy, a link that ends closes its destination outright (no half-close);
        # the other direction then reads EOF and ends too.
        self._closed_links += 1
        if reset:
            self.close(reset=True, why=f"reset by a toxic on {link.name}")
            return
        (self.upstream if link is self.links["upstream"] else self.client).close()
        if self._closed_links == len(self.links):
            self.close(why="both directions ended")

    def close(self, *, reset: bool = False, why: str) -> None:
        """End both sockets now (with RST when ``reset``) and stop every task; idempotent."""
        if self.done:
            return
        self.done = True
        for link in self.links.values():
            link.stop()
        for endpoint in (self.client, self.upstream):
            endpoint.abort(reset=reset)
        up, down = self.links["upstream"], self.links["downstream"]
        _logger.info(
            "proxy %s: closed client %s (%s) after %.3fs; bytes up %d/%d, down %d/%d",
            self.proxy.name,
            self.name,
            why,
            time.monotonic() - self.opened_at,
            up.bytes_read,
            up.bytes_written,
            down.bytes_read,
            down.bytes_written,
        )
        self.proxy.forget(self)


class Proxy:
    """A named proxy with its toxics and open connections; all methods run on the server's loop."""

    def __init__(self, name: str, listen: str, upstream: str, rng: random.Random) -> None:
        self.name = name
        self.listen = listen or "127.0.0.1:0"
        self.upstream = upstream
        self.enabled = False
        self.rng = rng
        self.toxics: dict[str, ToxicSpec] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._dialling: dict[Endpoint, asyncio.Task[None]] = {}  # accepted clients waiting for upstream
        self.on_change: Callable[[str, dict[str, object]], None] = lambda _op, _data: None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [toxic.to_json() for toxic in self.ordered_toxics()],
        }

    def ordered_toxics(self) -> list[ToxicSpec]:
        """Upstream toxics first, then downstream, each in the order added (as Toxiproxy lists them)."""
        return [toxic for stream in STREAMS for toxic in self.toxics_of(stream)]

    def toxics_of(self, stream: str) -> list[ToxicSpec]:
        return [toxic for toxic in self.toxics.values() if toxic.stream == stream]

    # -- listening ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen (again) on ``listen``; a no-op when already enabled."""
        if self.enabled:
            return
        host, port = split_address(self.listen)
        try:
            family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(address)
                sock.listen(128)
            except OSError:
                sock.close()
                raise
        except OSError as error:
            raise ApiError(f"proxy {self.name!r}: cannot listen on {self.listen}: {error}", 500) from error
        bound = sock.getsockname()
        self.listen = join_address(str(bound[0]), int(bound[1]))
        self._server = await asyncio.get_running_loop().create_server(
            lambda: Endpoint(on_made=self._accept), sock=sock
        )
        self.enabled = True
        _logger.info("proxy %s: started on %s -> %s", self.name, self.listen, self.upstream)
        self.on_change("proxy enable", {"proxy": self.name, "listen": self.listen})

    async def stop(self) -> None:
        """Stop listening and close every open connection; a no-op when already disabled."""
        if not self.enabled:
            return
        self.enabled = False
        server, self._server = self._server, None
        if server is not None:
            server.close()
        count = len(self._connections)
        for connection in list(self._connections):
            connection.close(why="proxy disabled")
        for client in list(self._dialling):
            client.abort()
        if server is not None:
            await server.wait_closed()
        _logger.info("proxy %s: terminated (closed %d open connections)", self.name, count)
        self.on_change("proxy disable", {"proxy": self.name, "closed_connections": count})

    async def update(self, *, listen: str, upstream: str, enabled: bool) -> None:
        if listen != self.listen or upstream != self.upstream:
            await self.stop()
            self.listen, self.upstream = listen, upstream
        if enabled:
            await self.start()
        else:
            await self.stop()

    def _accept(self, client: Endpoint) -> None:
        if not self.enabled:
            client.abort()
            return
        _logger.debug("proxy %s: accepted client %s -> %s", self.name, client.peer(), self.upstream)
        self._dialling[client] = asyncio.get_running_loop().create_task(self._dial(client))

    async def _dial(self, client: Endpoint) -> None:
        """Open the client's upstream connection, then join the two."""
        try:
            host, port = split_address(self.upstream)
            _, upstream = await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(Endpoint, host, port),
                UPSTREAM_CONNECT_TIMEOUT_S,
            )
        except (OSError, TimeoutError, ApiError) as error:
            _logger.warning(
                "proxy %s: unable to open connection to upstream %s: %r", self.name, self.upstream, error
            )
            client.abort()
            return
        finally:
            self._dialling.pop(client, None)
        if not self.enabled or client.lost:  # disabled, or the client gone, while we dialled
            client.abort()
            upstream.abort()
            return
        connection = Connection(self, client, upstream)
        self._connections.add(connection)
        connection.start()

    def forget(self, connection: Connection) -> None:
        self._connections.discard(connection)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    # -- toxics ---------------------------------------------------------------------------------
    def _links(self, stream: str) -> list[Link]:
        return [c.links[stream] for c in self._connections if not c.done]

    def add_toxic(self, toxic: ToxicSpec) -> None:
        if toxic.name in self.toxics:
            raise ApiError(f"toxic already exists: {toxic.name!r} on proxy {self.name!r}", 409)
        self.toxics[toxic.name] = toxic
        for link in self._links(toxic.stream):
            link.add_toxic(toxic)
        _logger.info(
            "proxy %s: added toxic %s (%d open connections)",
            self.name,
            toxic.to_json(),
            len(self._connections),
        )
        self.on_change("toxic add", {"proxy": self.name, "toxic": toxic.to_json()})

    def get_toxic(self, name: str) -> ToxicSpec:
        toxic = self.toxics.get(name)
        if toxic is None:
            raise ApiError(f"toxic not found: {name!r} on proxy {self.name!r}", 404)
        return toxic

    async def update_toxic(self, toxic: ToxicSpec) -> None:
        self.toxics[toxic.name] = toxic
        await asyncio.gather(*(link.update_toxic(toxic) for link in self._links(toxic.stream)))
        _logger.info("proxy %s: updated toxic %s", self.name, toxic.to_json())
        self.on_change("toxic update", {"proxy": self.name, "toxic": toxic.to_json()})

    async def remove_toxic(self, name: str) -> None:
        toxic = self.get_toxic(name)
        del self.toxics[name]
        await asyncio.gather(*(link.remove_toxic(name) for link in self._links(toxic.stream)))
        _logger.info("proxy %s: removed toxic %s", self.name, name)
        self.on_change("toxic remove", {"proxy": self.name, "toxic": name})

    async def remove_all_toxics(self) -> None:
        for name in list(self.toxics):
            await self.remove_toxic(name)
