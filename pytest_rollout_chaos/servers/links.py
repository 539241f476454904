"""Links: put the fault layer and a Toxiproxy proxy in front of every arrow of the stack.

``ProxyLinks`` is the ``link(name, upstream_url) -> url`` callback the stack builders take. For
each link it opens a listener of the HTTP fault layer that forwards to the upstream, then a
Toxiproxy proxy (listening on an OS-chosen port of ``listen_host``: loopback, or this machine's
address in a Ray cluster with nodes on other machines, where their servers reach it) in front of
that listener, and returns
the URL clients should use instead of the upstream's::

    client -> Toxiproxy proxy (TCP faults) -> fault layer (HTTP faults, recording) -> server

Toxiproxy is outermost so that its toxics act on the client's own connection, as they would in
front of the real server; the layer's one request at a time per upstream connection, and its
dropping of the client's connection when the upstream drops, keep it invisible to TCP-level
behaviour.
Which server a link leads to, and the History source of its requests, follow from its name:
``model->policy`` leads to ``policy`` (``model->policy[1]`` to the replica ``policy[1]``, source
``policy``), ``collector->agent:<instance>`` to that agent instance
(source ``agent``). Calls are synchronous with a deadline: stacks are built in synchronous
session fixtures.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from pytest_rollout_chaos.errors import ChaosError, FaultError
from pytest_rollout_chaos.servers.faultlayer import client as layer

COLLECTOR_TO_POLICY = "collector->policy"


class LinkError(ChaosError):
    """A proxy for a link could not be created."""


def proxy_name(link: str) -> str:
    """A URL-safe Toxiproxy proxy name for a link name (``model->policy`` -> ``model_to_policy``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", link.replace("->", "_to_"))


def link_server(link: str) -> tuple[str, str]:
    """The server a link leads to and the History source of its requests.

    ``collector->agent:calculator_agent`` -> ``("calculator_agent", "agent")``;
    ``agent->model`` -> ``("model", "model")``; ``model->policy[1]`` -> ``("policy[1]", "policy")``
    (a policy replica).
    """
    _, _, target = link.rpartition("->")
    source, _, instance = target.partition(":")
    return (instance or source), re.sub(r"\[[0-9]+\]$", "", source)


def _host_port(link: str, upstream_url: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(upstream_url)
    if parts.hostname is None or parts.port is None:
        raise LinkError(f"link {link!r}: upstream {upstream_url!r} has no host:port")
    return parts


class LayerLinks:
    """A fault-layer listener per link, no Toxiproxy: for tests that need semantic faults and the
    layer's recording but no TCP faults. Returns the listener's URL (with the upstream's path)."""

    def __init__(self, layer_url: str, *, timeout_s: float = 5.0) -> None:
        self.layer_url = layer_url.rstrip("/")
        self._timeout_s = timeout_s

    def __call__(self, link: str, upstream_url: str) -> str:
        parts = _host_port(link, upstream_url)
        return urllib.parse.urlunsplit(("http", self.listen(link, upstream_url), parts.path, "", ""))

    def listen(self, link: str, upstream_url: str) -> str:
        """Open the listener for ``link``; return its ``host:port``."""
        parts = _host_port(link, upstream_url)
        server, source = link_server(link)
        try:
            return layer.add_link(
                self.layer_url,
                name=link,
                server=server,
                source=source,
                upstream=f"{parts.scheme}://{parts.hostname}:{parts.port}",
                timeout_s=self._timeout_s,
            )
        except FaultError as error:
            raise LinkError(f"link {link!r}: {error}") from None


class ProxyLinks:
    """Creates and remembers one layer listener and one proxy per link; ``links`` maps link name
    to proxy name."""

    def __init__(
        self, api_url: str, layer_url: str, *, timeout_s: float = 5.0, listen_host: str = "127.0.0.1"
    ) -> None:
        self._api_url = api_url.rstrip("/")
        self._listen_host = listen_host
        self._layer = LayerLinks(layer_url, timeout_s=timeout_s)
        self.layer_url = self._layer.layer_url
        self._timeout_s = timeout_s
        self._links: dict[str, str] = {}

    @property
    def links(self) -> Mapping[str, str]:
        return dict(self._links)

    def __call__(self, link: str, upstream_url: str) -> str:
        parts = _host_port(link, upstream_url)
        name = proxy_name(link)
        upstream = self._layer.listen(link, upstream_url)
        body = {"name": name, "listen": f"{self._listen_host}:0", "upstream": upstream}
        created = self._post("/proxies", body, link)
        listen = str(created.get("listen", ""))
        host, _, port = listen.rpartition(":")
        if not port.isdigit() or port == "0":
            raise LinkError(f"link {link!r}: Toxiproxy answered listen={listen!r}, not a bound port")
        self._links[link] = name
        # plain http even to an https upstream: clients reach the proxy and the layer, which talks TLS on
        return urllib.parse.urlunsplit(("http", f"{host or self._listen_host}:{port}", parts.path, "", ""))

    def _post(self, path: str, body: Mapping[str, object], link: str) -> dict[str, object]:
        request = urllib.request.Request(
            self._api_url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            raise LinkError(
                f"link {link!r}: Toxiproxy at {self._api_url} refused {body}: {error.code} {detail}"
            ) from None
        except (OSError, ValueError) as error:
            raise LinkError(f"link {link!r}: Toxiproxy at {self._api_url} did not answer: {error}") from None
        if not isinstance(answer, dict):
            raise LinkError(f"link {link!r}: Toxiproxy answered {answer!r}, not a proxy object")
        return answer
