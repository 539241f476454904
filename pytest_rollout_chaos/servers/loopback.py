"""Control endpoints answer the loopback peer only: 127.0.0.1 or ::1, not 127.0.0.2, not a remote host.

One more peer is trusted where the harness names it in ``CONTROL_PEER_ENV``: a server on a Ray node
listening on an address other than loopback sees pytest's connections come from that address (this
machine's own, or pytest's machine's for a node elsewhere), and the hosting actor names it.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

LOOPBACK_PEERS: Final = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})
CONTROL_PEER_ENV: Final = "ROLLOUT_CHAOS_CONTROL_PEER"


def peer_allowed(host: str | None) -> bool:
    """Only the loopback peer itself (or the one peer the harness named) may drive faults or test controls."""
    return host in LOOPBACK_PEERS or (host is not None and host == os.environ.get(CONTROL_PEER_ENV))


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
