"""Free loopback ports for programs that must be told their port (they cannot bind 0 and report it).

A port chosen here was free a moment ago; another program may take it before ours binds it, a
race every caller accepts in exchange for a port it can name on a command line. Servers that
can report their own port (ours, the fault layer's links) bind 0 instead.
"""

from __future__ import annotations

import contextlib
import socket

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A port the OS just gave out on ``host``."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct ports on ``host``, all held open at once while choosing."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports
