"""Which Toxiproxy serves the network faults, per ``--rollout-chaos-toxiproxy``, and starting it.

``auto`` takes, in order: the URL in ``TOXIPROXY_URL``; ``toxiproxy-server`` on PATH; the
``ghcr.io/shopify/toxiproxy`` container when a Docker engine answers and the Docker SDK (the
``[docker]`` extra) is installed; else the embedded server. ``embedded``, ``binary``, ``docker``
or an ``http(s)://`` URL force one, and fail with a message that says what to install or start
when it is not there.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_rollout_chaos import extras
from pytest_rollout_chaos.errors import ServerStartError
from pytest_rollout_chaos.servers.ports import free_port
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.servers.toxiproxy.spec import binary_spec, embedded_spec

URL_ENV: Final = "TOXIPROXY_URL"
BINARY: Final = "toxiproxy-server"
DOCKER_IMAGE: Final = "ghcr.io/shopify/toxiproxy:2.12.0"
MODES: Final = ("auto", "embedded", "binary", "docker")
INSTALL_HINT: Final = (
    "install toxiproxy-server from https://github.com/Shopify/toxiproxy/releases and put it on PATH, "
    f"or set {URL_ENV}, or use --rollout-chaos-toxiproxy=embedded"
)
PROBE_TIMEOUT_S: Final = 2.0
DOCKER_READY_TIMEOUT_S: Final = 120.0

HarnessStart = Callable[[ServerSpec], ManagedProcess]


@dataclass(frozen=True, slots=True)
class ToxiproxyServer:
    """A Toxiproxy API in use: what kind, where, and how to stop it (a no-op for a URL)."""

    kind: str  # "url" | "binary" | "docker" | "embedded"
    api_url: str
    stop: Callable[[], None] = field(repr=False)
    detail: str = ""

    def describe(self) -> str:
        """One line for the report header."""
        return f"toxiproxy: {self.kind} at {self.api_url}" + (f" ({self.detail})" if self.detail else "")


def start_toxiproxy(mode: str, *, harness_start: HarnessStart, seed: int) -> ToxiproxyServer:
    """Start (or connect to) the Toxiproxy that ``mode`` names; raise ``ServerStartError`` if impossible."""
    if mode.startswith(("http://", "https://")):
        return connect_url(mode, source="--rollout-chaos-toxiproxy")
    if mode == "auto":
        if os.environ.get(URL_ENV):
            return connect_url(os.environ[URL_ENV], source=f"${URL_ENV}")
        if shutil.which(BINARY):
            return start_binary(harness_start)
        if extras.installed(extras.DOCKER) and docker_available() is None:
            return start_docker()
        return start_embedded(harness_start, seed=seed)
    if mode == "embedded":
        return start_embedded(harness_start, seed=seed)
    if mode == "binary":
        return start_binary(harness_start)
    if mode == "docker":
        return start_docker()
    raise ServerStartError(
        f"unknown Toxiproxy mode {mode!r} (valid: {', '.join(MODES)}, or an http:// URL of a Toxiproxy API)"
    )


def connect_url(url: str, *, source: str) -> ToxiproxyServer:
    version = api_version(url)
    if version is None:
        raise ServerStartError(
            f"no Toxiproxy API answers at {url!r} (from {source}): GET /version failed within "
            f"{PROBE_TIMEOUT_S:.0f}s; start the server, fix the URL, or unset it to use another mode"
        )
    return ToxiproxyServer("url", url.rstrip("/"), lambda: None, detail=f"version {version}, from {source}")


def start_embedded(harness_start: HarnessStart, *, seed: int) -> ToxiproxyServer:
    process = harness_start(embedded_spec(seed=seed))
    return ToxiproxyServer(
        "embedded", process.url, _discard(process.stop), detail=f"seed {seed}, log {process.log_path}"
    )


def start_binary(harness_start: HarnessStart) -> ToxiproxyServer:
    binary = shutil.which(BINARY)
    if binary is None:
        raise ServerStartError(f"{BINARY} is not on PATH: {INSTALL_HINT}")
    process = harness_start(binary_spec(binary, port=free_port()))
    return ToxiproxyServer("binary", process.url, _discard(process.stop), detail=binary)


def docker_available() -> str | None:
    """None when a Docker engine answers ``GET /_ping`` on ``DOCKER_HOST``; else why not.

    A raw probe with a deadline, not the SDK: the SDK leaks its socket when the engine is absent.
    """
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    scheme, _, rest = host.partition("://")
    try:
        if scheme == "unix":
            if not os.path.exists(rest):
                return f"no socket at {rest}"
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(PROBE_TIMEOUT_S)
            target: Any = rest
        elif scheme == "tcp":
            address, _, port = rest.partition(":")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(PROBE_TIMEOUT_S)
            target = (address, int(port.rstrip("/") or 2375))
        else:
            return f"DOCKER_HOST={host!r} is not a unix:// or tcp:// address"
        with sock:
            sock.connect(target)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            status_line = sock.recv(64).split(b"\r\n", 1)[0].decode(errors="replace")
    except (OSError, ValueError) as error:
        return f"{host}: {error}"
    if " 200" not in status_line:
        return f"{host} answered {status_line!r} to GET /_ping"
    return None


def start_docker() -> ToxiproxyServer:
    """The Toxiproxy container on the host network (Linux engines), removed on stop."""
    problem = docker_available()
    if problem is not None:
        raise ServerStartError(
            f"no Docker engine is reachable ({problem}); start Docker (check DOCKER_HOST), "
            "or use --rollout-chaos-toxiproxy=embedded or =binary"
        )
    extras.require(extras.DOCKER, "--rollout-chaos-toxiproxy=docker")
    import docker

    client = docker.from_env()
    port = free_port()
    container: Any = client.containers.run(
        DOCKER_IMAGE,
        command=["-host", "127.0.0.1", "-port", str(port)],
        network_mode="host",
        detach=True,
        labels={"pytest-rollout-chaos": "toxiproxy"},
    )

    def stop() -> None:
        try:
            container.remove(force=True)
        finally:
            client.close()

    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + DOCKER_READY_TIMEOUT_S
    while api_version(url) is None:
        container.reload()
        if container.status == "exited" or time.monotonic() > deadline:
            logs = container.logs(tail=40).decode(errors="replace")
            stop()
            raise ServerStartError(
                f"the {DOCKER_IMAGE} container did not answer at {url} within "
                f"{DOCKER_READY_TIMEOUT_S:.0f}s (status {container.status}); last log lines:\n{logs}\n"
                "hint: it needs a Linux engine with host networking"
            )
        time.sleep(0.2)
    return ToxiproxyServer("docker", url, stop, detail=f"{DOCKER_IMAGE}, container {container.short_id}")


def api_version(url: str) -> str | None:
    """The version a Toxiproxy API at ``url`` reports, or None if it does not answer in time."""
    request = urllib.request.Request(
        url.rstrip("/") + "/version", headers={"User-Agent": "pytest-rollout-chaos"}
    )
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:
            text = response.read().decode(errors="replace")
    except (OSError, urllib.error.URLError, ValueError):
        return None
    try:
        return str(json.loads(text)["version"])
    except (ValueError, KeyError, TypeError):
        return text.strip() or "unknown"


def _discard(stop: Callable[[], object]) -> Callable[[], None]:
    def call() -> None:
        stop()

    return call
