"""Control endpoints answer the loopback peer only: 127.0.0.1 or ::1, not 127.0.0.2, not a remote host."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

LOOPBACK_PEERS: Final = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})


def peer_allowed(host: str | None) -> bool:
    """Only the loopback peer itself may drive faults or test controls."""
    return host in LOOPBACK_PEERS


def loopback_only(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """Wrap a control handler so that only the loopback peer may call it (others get 403)."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        host = peer[0] if isinstance(peer, tuple) and peer else None
        if not peer_allowed(host):
            return web.json_response(
                {"error": f"the control endpoint answers loopback only; peer {host!r} refused"},
                status=403,
            )
        return await handler(request)

    return guarded
