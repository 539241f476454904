"""Nothing we start is reachable from outside the machine.

Every socket the stack's processes (and their children) bind, listening TCP or bound UDP, is
on loopback, the fault layer's link ports included; and every control endpoint answers only
the loopback peer itself: a client bound to 127.0.0.2 is refused with 403 and changes nothing.
That is the fault layer's control API (arm, list, disarm, links, rows, reset) and our Gym
servers' ``/_gym/*`` test controls. Toxiproxy's own API is Toxiproxy's (it has no such guard),
so it is not checked here.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from pytest_rollout_chaos.harness import ChaosHarness
from pytest_rollout_chaos.servers.faultlayer import api
from pytest_rollout_chaos.servers.faultlayer import client as layer
from pytest_rollout_chaos.servers.faultlayer.spec import NAME as FAULT_LAYER
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.stack import ChaosStack

pytestmark = pytest.mark.slow  # starts the whole stack

LOOPBACK = frozenset({"127.0.0.1", "::1"})
FOREIGN_PEER = "127.0.0.2"  # loopback too, but not the peer the guard trusts
TIMEOUT_S = 5.0


def _tree(process: ManagedProcess) -> Iterator[psutil.Process]:
    root = psutil.Process(process.pid)
    yield root
    yield from root.children(recursive=True)


def _bound_sockets(process: psutil.Process) -> list[tuple[str, int, str]]:
    """(ip, port, kind) of every listening TCP socket and every bound, unconnected UDP socket."""
    found = []
    for connection in process.net_connections(kind="inet"):
        listening = connection.status == psutil.CONN_LISTEN
        bound_udp = connection.status == psutil.CONN_NONE and not connection.raddr
        if (listening or bound_udp) and connection.laddr:
            found.append((connection.laddr.ip, connection.laddr.port, "tcp" if listening else "udp"))
    return found


def _layer_url(stack: ChaosStack) -> str:
    assert stack.fault_layer is not None, "the session's stack always runs the fault layer"
    return stack.fault_layer.url


def _layer_links(stack: ChaosStack) -> list[dict[str, Any]]:
    answer = layer.call_sync(_layer_url(stack), "GET", "/links", None, timeout_s=TIMEOUT_S)
    return list(answer["links"])


def test_every_socket_the_stack_binds_is_on_loopback(
    chaos_stack: ChaosStack, chaos_harness: ChaosHarness
) -> None:
    chaos_stack.reset()  # every server running, whatever an earlier test did
    bound: dict[str, list[tuple[str, int, str]]] = {}
    for process in chaos_harness.processes:
        if process.is_running():
            bound[process.name] = [entry for child in _tree(process) for entry in _bound_sockets(child)]
    assert set(chaos_stack.servers()) - {"agent", "model", "resources", "head"} <= set(bound)
    assert all(bound.values()), f"a server listens nowhere; the inspection sees nothing: {bound}"
    proxies = bound.get("toxiproxy", [])
    assert len(proxies) > len(chaos_stack.links), f"expected the API plus one port per link: {proxies}"
    layer_ports = {port for _, port, kind in bound.get(FAULT_LAYER, []) if kind == "tcp"}
    link_ports = {int(link["listen"].rpartition(":")[2]) for link in _layer_links(chaos_stack)}
    assert len(link_ports) == len(chaos_stack.links), f"one layer port per link: {_layer_links(chaos_stack)}"
    control = _layer_url(chaos_stack).rpartition(":")[2]
    assert link_ports | {int(control)} <= layer_ports, f"the layer's control and link ports: {bound}"
    exposed = {name: [e for e in entries if e[0] not in LOOPBACK] for name, entries in bound.items()}
    assert not any(exposed.values()), f"sockets bound beyond loopback: {exposed}"


def _request(url: str, method: str, path: str, body: object | None, *, source: str) -> tuple[int, str]:
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None
    connection = http.client.HTTPConnection(
        parts.hostname, parts.port, timeout=TIMEOUT_S, source_address=(source, 0)
    )
    try:
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def control_routes() -> list[tuple[str, str]]:
    """(method, path) of every route of the fault layer's control API, read from a freshly built app.

    So a control endpoint added later is covered without touching this test.
    """
    routes = set()
    for route in api.build_app().router.routes():
        if route.resource is not None and route.method != "HEAD":
            routes.add((route.method, route.resource.canonical))
    return sorted(routes)


ROUTES = control_routes()
SENTINEL_ROUTE = "/never/requested"
# Bodies a handler would accept, so a missing guard shows as the handler's answer, not a 400.
BODIES: dict[str, object] = {
    "/links": {"name": "foreign", "server": "foreign", "source": "foreign", "upstream": "http://127.0.0.1:9"},
    "/rules": {"server": "policy", "effect": "http_error", "status": 503, "match": {"route": "/nothing"}},
    "/rows": {"rows": [{"_rowidx": 0, "responses_create_params": {"input": "a foreign prompt here"}}]},
    "/reset": {},
}


def test_the_control_routes_are_found() -> None:
    for route in [("POST", "/rules"), ("DELETE", "/rules/{rule_id}"), ("POST", "/links"), ("POST", "/reset")]:
        assert route in ROUTES, ROUTES


def _rules(url: str) -> list[dict[str, Any]]:
    status, text = _request(url, "GET", "/rules", None, source="127.0.0.1")
    assert status == 200, f"the loopback peer itself was refused: {status} {text}"
    return list(json.loads(text)["rules"])


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_every_fault_layer_control_route_refuses_a_non_loopback_peer(
    chaos_stack: ChaosStack, chaos_harness: ChaosHarness, method: str, path: str
) -> None:
    chaos_stack.reset()
    url = _layer_url(chaos_stack)
    (process,) = [process for process in chaos_harness.processes if process.name == FAULT_LAYER]
    # an armed rule a foreign reset or disarm would remove, on a route nothing requests
    sentinel = layer.call_sync(
        url,
        "POST",
        "/rules",
        {"server": "policy", "effect": "delay", "match": {"route": SENTINEL_ROUTE}},
        timeout_s=TIMEOUT_S,
    )["id"]
    links_before = _layer_links(chaos_stack)
    try:
        target = re.sub(r"\{[^}]+\}", str(sentinel), path)
        status, text = _request(url, method, target, BODIES.get(path), source=FOREIGN_PEER)
        assert status == 403, f"{method} {target} from {FOREIGN_PEER}: {status} {text}"
        assert "loopback only" in text, f"403 without saying why: {text}"
        assert process.is_running(), f"a foreign {method} {target} made the fault layer exit"
        assert [rule["id"] for rule in _rules(url)] == [sentinel], (
            f"a foreign {method} {target} changed rules"
        )
        assert _layer_links(chaos_stack) == links_before, f"a foreign {method} {target} changed the links"
    finally:
        layer.reset(url)


GYM_CONTROL = [
    ("resources", "GET", "/_gym/state", None),
    ("resources", "POST", "/_gym/latency", {"per_call_ms": 900}),
    ("resources", "POST", "/_gym/reset", {}),
    ("model", "POST", "/_gym/splice", {"enabled": False}),
    ("model", "POST", "/_gym/reset", {}),
]


@pytest.mark.parametrize(
    ("server", "method", "path", "body"), GYM_CONTROL, ids=[f"{s} {m} {p}" for s, m, p, _ in GYM_CONTROL]
)
def test_gym_test_controls_refuse_a_non_loopback_peer(
    chaos_stack: ChaosStack, server: str, method: str, path: str, body: object | None
) -> None:
    chaos_stack.reset()
    process = chaos_stack.servers()[server]
    status, text = _request(process.url, method, path, body, source=FOREIGN_PEER)
    assert status == 403, f"{server}: {method} {path} from {FOREIGN_PEER}: {status} {text}"
    assert "loopback only" in text
    assert process.is_running(), f"{server}: a foreign {method} {path} made the server exit"
    resources = chaos_stack.servers()["resources"]
    status, text = _request(resources.url, "GET", "/_gym/state", None, source="127.0.0.1")
    assert status == 200, text
    assert "900" not in text, f"a foreign peer changed the environment latency: {text}"
