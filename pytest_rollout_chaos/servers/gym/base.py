"""What every Gym server of ours shares: NeMo Gym's error behaviour, health, JSON bodies.

NeMo Gym servers wrap any handler exception into HTTP 500 whose body is a JSON string (the
exception's repr, or "Hit an exception in <server> calling an inner server: ..."); callers
read that text. ``gym_app`` builds an app with that error wrapping and the server's event
writer for what only the server knows (turns, model calls, environment batches); requests and
their answers are recorded by the fault layer in front of every server.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Handler

from pytest_rollout_chaos.history import EventWriter


class InnerServerError(Exception):
    """A peer server answered badly; the message names it, the URL, the status and the body."""

    def __init__(self, server: str, url: str, status: int | None, reason: str) -> None:
        self.server = server
        self.url = url
        self.status = status
        self.reason = reason
        status_text = f"HTTP {status}" if status is not None else "no response"
        super().__init__(f"{server} at {url}: {status_text}: {reason}")


class HoldsSession(Protocol):
    """An app state that may have opened a client session to its peers."""

    session: aiohttp.ClientSession | None


def close_session_on_cleanup(app: web.Application, state_key: web.AppKey[Any]) -> None:
    """Close ``app[state_key].session`` when the app shuts down."""

    async def close(app: web.Application) -> None:
        state: HoldsSession = app[state_key]
        if state.session is not None:
            await state.session.close()

    app.on_cleanup.append(close)


def gym_app(name: str, source: str) -> tuple[web.Application, EventWriter]:
    """A new app with NeMo Gym's exception-to-500 wrapping, and the server's event writer."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    writer = EventWriter(source)
    app.middlewares.append(_error_middleware(name))
    app.router.add_get("/health", _health)
    app.router.add_get("/", _health)
    return app, writer


async def _health(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def _error_middleware(name: str) -> Any:
    @web.middleware
    async def wrap_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except InnerServerError as error:
            text = f"Hit an exception in {name} calling an inner server: {error}"
            return web.json_response(text, status=500)
        except Exception as error:
            return web.json_response(repr(error), status=500)

    return wrap_errors


async def json_body(request: web.Request) -> Any:
    """The request's JSON body, or HTTP 400 saying what was wrong with it."""
    raw = await request.read()
    try:
        return json.loads(raw) if raw else {}
    except ValueError as error:
        raise web.HTTPBadRequest(
            text=json.dumps(f"body is not JSON ({error}): {raw[:200]!r}"), content_type="application/json"
        ) from error


async def json_object(request: web.Request) -> dict[str, Any]:
    """The request's JSON body, which must be an object."""
    body = await json_body(request)
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text=json.dumps(f"body must be a JSON object, got {type(body).__name__}"),
            content_type="application/json",
        )
    return body
