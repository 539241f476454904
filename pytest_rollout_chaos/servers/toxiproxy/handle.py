"""What the ``chaos_toxiproxy`` fixture hands out: the server in use and ways to talk to it."""

from __future__ import annotations

import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from pytest_rollout_chaos import extras
from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient
from pytest_rollout_chaos.servers.toxiproxy.controller import ToxiproxyServer


@dataclass(frozen=True, slots=True)
class ChaosToxiproxy:
    """The session's Toxiproxy: ``server``, ``api_url``, an async client, a toxiproxy-python client."""

    server: ToxiproxyServer

    @property
    def api_url(self) -> str:
        return self.server.api_url

    def client(self, *, timeout_s: float = 5.0) -> ToxiproxyClient:
        """A new async client; close it (``async with``) in the same event loop."""
        return ToxiproxyClient(self.api_url, timeout_s=timeout_s)

    def toxiproxy_python(self) -> Any:
        """A ``toxiproxy.Toxiproxy`` pointed at this server.

        toxiproxy-python keeps the address in class attributes of ``APIConsumer``, so this
        points every ``Toxiproxy()`` of the process here (one server per process). It comes
        with the ``[toxiproxy]`` extra.
        """
        extras.require(extras.TOXIPROXY, "chaos_toxiproxy.toxiproxy_python()")
        from toxiproxy import Toxiproxy

        parts = urllib.parse.urlsplit(self.api_url)
        client = Toxiproxy()
        client.update_api_consumer(parts.hostname, parts.port or 80)
        return client

    def reset(self, *, timeout_s: float = 5.0) -> None:
        """Enable every proxy and remove every toxic (synchronous, for fixtures)."""
        request = urllib.request.Request(
            self.api_url + "/reset", method="POST", headers={"User-Agent": "pytest-rollout-chaos"}
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
