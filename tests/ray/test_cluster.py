"""Where the nodes of ``local:N`` run, and which nodes of a joined cluster are accepted: with real
sockets on this machine, no Ray needed."""

from __future__ import annotations

import socket
import time

import pytest

from pytest_rollout_chaos.ray.mode import RayMode, parse
from pytest_rollout_chaos.ray.nodes import (
    RayClusterError,
    check_bindable,
    check_reachable,
    is_this_machine,
    node_address,
)

JOINED = RayMode("address", address="10.0.0.1:6379")


def test_each_local_node_has_its_own_loopback_address_and_pytest_keeps_127_0_0_1() -> None:
    addresses = [node_address(index) for index in range(8)]
    assert addresses[:3] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert len(set(addresses)) == 8
    assert "127.0.0.1" not in addresses


def test_the_node_addresses_of_local_3_can_be_listened_on_here() -> None:
    check_bindable(parse("local:3"), [node_address(index) for index in range(3)])


def test_an_address_this_machine_cannot_listen_on_is_a_usage_error_naming_node_and_address() -> None:
    with pytest.raises(RayClusterError, match=r"local:2: node 1 runs on the loopback address 192\.0\.2\.7"):
        check_bindable(parse("local:2"), ["127.0.0.2", "192.0.2.7"])  # TEST-NET-1: on no machine


def ray_node(node_id: str, host: str, port: int) -> dict[str, object]:
    return {"NodeID": node_id, "NodeManagerAddress": host, "NodeManagerPort": port, "Alive": True}


def test_nodes_elsewhere_whose_addresses_answer_are_accepted() -> None:
    with socket.socket() as raylet:
        raylet.bind(("127.0.0.5", 0))
        raylet.listen()
        check_reachable(JOINED, [ray_node("ab" * 28, "127.0.0.5", raylet.getsockname()[1])])


def test_a_node_whose_address_does_not_answer_is_named_with_its_address() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.6", 0))  # bound, not listening: connections are refused
        port = unused.getsockname()[1]
        with pytest.raises(RayClusterError) as raised:
            check_reachable(JOINED, [ray_node("cd" * 28, "127.0.0.6", port)])
    assert f"node cdcdcdcd at 127.0.0.6:{port}" in str(raised.value)
    assert "--rollout-chaos-ray=10.0.0.1:6379" in str(raised.value)


def test_an_unreachable_address_is_reported_within_the_deadline() -> None:
    started = time.monotonic()
    with pytest.raises(RayClusterError, match=r"within 0\.5s: node efefefef at 192\.0\.2\.7:6380"):
        check_reachable(JOINED, [ray_node("ef" * 28, "192.0.2.7", 6380)], timeout_s=0.5)
    assert time.monotonic() - started < 2.5  # 5x the deadline


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.3", "::1", "localhost"])
def test_loopback_and_this_machines_names_are_this_machine(address: str) -> None:
    assert is_this_machine(address)


def test_an_address_of_no_interface_here_is_another_machine() -> None:
    assert not is_this_machine("192.0.2.77")  # TEST-NET-1


def test_an_address_of_an_interface_here_is_this_machine() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this picks the outgoing interface's address
        assert is_this_machine(probe.getsockname()[0])
