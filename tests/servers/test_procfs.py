"""``procfs.listening`` reads what a process listens on from /proc, with real sockets of this process."""

from __future__ import annotations

import os
import socket

from pytest_rollout_chaos.servers.procfs import listening


def test_a_listening_socket_is_found_on_its_own_address() -> None:
    with socket.socket() as server, socket.socket() as idle:
        server.bind(("127.0.0.3", 0))
        server.listen()
        idle.bind(("127.0.0.1", 0))  # bound, not listening: not reported
        found = listening(os.getpid())
        assert ("127.0.0.3", server.getsockname()[1]) in found
        assert all(port != idle.getsockname()[1] for _, port in found)


def test_an_ipv6_listener_is_read_as_ipv6() -> None:
    with socket.socket(socket.AF_INET6) as server:
        server.bind(("::1", 0))
        server.listen()
        assert ("::1", server.getsockname()[1]) in listening(os.getpid())


def test_a_process_that_is_gone_listens_on_nothing() -> None:
    assert listening(2**22 + 1) == set()
