"""A small real server that records events: ``POST /emit`` records ``n`` events and answers at once.

Right before recording, it queues a callback that blocks its event loop for ``stall_s`` seconds,
so anything left for the loop's next turn (a buffered write of those events) comes that much
after the answer has left: the answer must not overtake what was recorded before it.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from pytest_rollout_chaos.history import EventWriter
from pytest_rollout_chaos.servers.serve import serve

WRITER_KEY = web.AppKey("events_server_writer", EventWriter)


async def emit(request: web.Request) -> web.Response:
    count = int(request.query.get("n", "1"))
    stall_s = float(request.query.get("stall_s", "0"))
    asyncio.get_running_loop().call_soon(time.sleep, stall_s)
    for index in range(count):
        request.app[WRITER_KEY].emit("info", "emitted", {"index": index})
    return web.json_response({"emitted": count})


def main() -> None:
    app = web.Application()
    app[WRITER_KEY] = EventWriter("events_server")
    app.router.add_get("/health", lambda _request: _ok())
    app.router.add_post("/emit", emit)
    serve(app)


async def _ok() -> web.Response:
    return web.json_response({"status": "ok"})


if __name__ == "__main__":
    main()
