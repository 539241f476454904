"""The fault layer's control API (loopback peers only), and the link listeners it opens.

- ``POST /links`` ``{name, server, source, upstream}`` -> 201 ``{name, listen}``: a new
  listener on an OS-chosen loopback port that forwards to ``upstream``; ``GET /links``.
- ``POST /rules`` ``{server, effect, match, tag?, seed?, ...}`` -> 201 ``{id}`` (see
  ``rules``); ``GET /rules`` lists them with their counters; ``DELETE /rules/{id}``;
  ``DELETE /rules`` (optionally ``?tag=``) disarms.
- ``POST /rows`` ``{rows: [row, ...]}``: rows whose prompts tie requests to them (see ``rows``).
- ``POST /reset``: disarm every rule and forget every row (each scenario starts clean).

A ``hang`` waits on an event that disarming (or shutdown) sets, so no waiter outlives it.
With ``processes`` above 1 the app starts the layer's worker processes before it is ready and
each link listens in every process (``workers``); they stop with the app.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

from pytest_rollout_chaos.servers.faultlayer.proxy import LinkPort
from pytest_rollout_chaos.servers.faultlayer.rules import RuleError
from pytest_rollout_chaos.servers.faultlayer.state import LayerState, Link
from pytest_rollout_chaos.servers.faultlayer.workers import Workers
from pytest_rollout_chaos.servers.loopback import loopback_only

STATE_KEY: Final = web.AppKey("fault_layer_state", LayerState)
PORTS_KEY: Final = web.AppKey("fault_layer_ports", list[tuple[asyncio.Server, LinkPort]])
WORKERS_KEY: Final = web.AppKey("fault_layer_workers", Workers)
_LINK_FIELDS: Final = ("name", "server", "source", "upstream")


def build_app(state: LayerState | None = None, *, processes: int = 1) -> web.Application:
    """The control app; link listeners are opened on its loop and closed with it; ``processes``:
    the layer's processes, this one included."""
    app = web.Application()
    app[STATE_KEY] = state or LayerState()
    app[PORTS_KEY] = []
    if processes > 1:
        app[WORKERS_KEY] = Workers(app[STATE_KEY], processes - 1)
        app.on_startup.append(_start_workers)
    routes: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] = [
        ("GET", "/health", _health),
        ("POST", "/links", _add_link),
        ("GET", "/links", _list_links),
        ("POST", "/rules", _arm),
        ("GET", "/rules", _list_rules),
        ("DELETE", "/rules", _clear_rules),
        ("DELETE", "/rules/{rule_id}", _disarm),
        ("POST", "/rows", _register_rows),
        ("POST", "/reset", _reset),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, loopback_only(handler))
    app.on_shutdown.append(_release_waiters)
    app.on_cleanup.append(_close_links)
    return app


async def _start_workers(app: web.Application) -> None:
    await app[WORKERS_KEY].start()


async def _release_waiters(app: web.Application) -> None:
    app[STATE_KEY].clear()


async def _close_links(app: web.Application) -> None:
    workers = app.get(WORKERS_KEY)
    try:
        if workers is not None:
            await workers.stop()
    finally:
        for server, port in app[PORTS_KEY]:
            server.close()
            await port.close()
            await server.wait_closed()


def _error(message: str, status: int = 400) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def _json_body(request: web.Request) -> object:
    if not request.body_exists:
        return {}
    try:
        return json.loads(await request.read())
    except ValueError as error:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"body is not JSON: {error}"}), content_type="application/json"
        ) from None


async def _health(_request: web.Request) -> web.StreamResponse:
    return web.json_response({"status": "ok"})


async def _add_link(request: web.Request) -> web.StreamResponse:
    body = await _json_body(request)
    if not isinstance(body, dict):
        return _error(f"link: expected an object with {', '.join(_LINK_FIELDS)}")
    for key in _LINK_FIELDS:
        if not isinstance(body.get(key), str) or not body[key]:
            return _error(f"{key}: expected a non-empty string, got {body.get(key)!r}")
    upstream = body["upstream"].rstrip("/")
    if not upstream.startswith(("http://", "https://")):
        return _error(f"upstream: expected http://host:port, got {upstream!r}")
    state = request.app[STATE_KEY]
    if body["name"] in state.links:
        return _error(f"name: link {body['name']!r} exists already", status=409)
    link = Link(name=body["name"], server=body["server"], source=body["source"], upstream=upstream)
    try:
        port = LinkPort(state, link)
    except ValueError as error:
        return _error(str(error))
    workers = request.app.get(WORKERS_KEY)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if workers is not None:  # the workers bind the same port: the kernel spreads connections
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", 0))
    server = await asyncio.get_running_loop().create_server(port.protocol, sock=sock, backlog=1024)
    request.app[PORTS_KEY].append((server, port))
    listen = f"127.0.0.1:{sock.getsockname()[1]}"
    state.links[link.name] = dataclasses.replace(link, listen=listen)
    if workers is not None:
        await workers.add_link(state.links[link.name])
    return web.json_response({"name": link.name, "listen": listen}, status=201)


async def _list_links(request: web.Request) -> web.StreamResponse:
    links = request.app[STATE_KEY].links.values()
    return web.json_response({"links": [dataclasses.asdict(link) for link in links]})


async def _arm(request: web.Request) -> web.StreamResponse:
    try:
        rule = request.app[STATE_KEY].arm(await _json_body(request))
    except RuleError as error:
        return _error(str(error))
    await request.app[STATE_KEY].settle()
    return web.json_response({"id": rule.id}, status=201)


async def _list_rules(request: web.Request) -> web.StreamResponse:
    return web.json_response({"rules": [rule.describe() for rule in request.app[STATE_KEY].rules.values()]})


async def _clear_rules(request: web.Request) -> web.StreamResponse:
    disarmed = request.app[STATE_KEY].clear(request.query.get("tag"))
    await request.app[STATE_KEY].settle()
    return web.json_response({"disarmed": disarmed})


async def _disarm(request: web.Request) -> web.StreamResponse:
    rule_id = request.match_info["rule_id"]
    if not request.app[STATE_KEY].disarm(rule_id):
        return _error(f"no armed rule {rule_id!r}", status=404)
    await request.app[STATE_KEY].settle()
    return web.json_response({"disarmed": [rule_id]})


async def _register_rows(request: web.Request) -> web.StreamResponse:
    body = await _json_body(request)
    rows = body.get("rows") if isinstance(body, dict) else None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        return _error("rows: expected a list of NeMo Gym rows (objects with _rowidx)")
    state = request.app[STATE_KEY]
    learnt = sum(1 for row in rows if state.rows.register(row))
    await state.settle()
    return web.json_response({"registered": learnt})


async def _reset(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    disarmed = state.clear()
    state.rows.clear()
    await state.settle()
    return web.json_response({"disarmed": disarmed})
