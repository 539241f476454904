"""``rollout-chaos toxiproxy``: the embedded Toxiproxy in the foreground, driven by toxiproxy-python
as a user without pytest would, and stopped by SIGINT or SIGTERM with exit status 0."""

from __future__ import annotations

import queue
import re
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO

import pytest
from toxiproxy import Toxiproxy

START_GUARD_S = 60.0  # a hang guard while reading the start line, not a timing assertion


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[str]:
    """A TCP echo server on loopback, as the proxies' upstream."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Output:
    """The command's output lines, read by a thread until it ends (a selector on the pipe would
    miss a line that a ``readline`` before it already pulled into the file's buffer)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self.lines: queue.Queue[str] = queue.Queue()
        self.thread = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[str]) -> None:
        with stream:
            for line in stream:
                self.lines.put(line)

    def rest(self) -> str:
        """Every line not taken yet, once the command has ended and the pipe is closed."""
        self.thread.join(timeout=30)
        taken = []
        while not self.lines.empty():
            taken.append(self.lines.get_nowait())
        return "".join(taken)


def _start(*args: str) -> tuple[subprocess.Popen[str], int, _Output]:
    """Start the command; return it, the port from its ``listening on http://host:port`` line and
    its output."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_rollout_chaos.cli", "toxiproxy", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = _Output(process)
    deadline = time.monotonic() + START_GUARD_S
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = output.lines.get(timeout=left)
        except queue.Empty:
            break
        seen.append(line)
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if match:
            return process, int(match.group(1)), output
    process.kill()
    process.wait()
    pytest.fail(f"no 'listening on' line; output: {''.join(seen) + output.rest()!r}")


def _roundtrip(listen: str, payload: bytes) -> bytes:
    host, port = listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(payload)
        return conn.recv(len(payload))


@pytest.mark.parametrize("stop_with", [signal.SIGINT, signal.SIGTERM])
def test_toxiproxy_python_drives_it_and_a_signal_stops_it(echo: str, stop_with: signal.Signals) -> None:
    process, port, output = _start("--port", "0")
    try:
        server = Toxiproxy()
        server.update_api_consumer("127.0.0.1", port)
        assert server.running()
        proxy = server.create(upstream=echo, name="to_echo", listen="127.0.0.1:0")
        assert _roundtrip(proxy.listen, b"ping") == b"ping"
        proxy.add_toxic(type="latency", attributes={"latency": 10})
        assert list(proxy.toxics()) == ["latency_downstream"]
        assert list(server.proxies()) == ["to_echo"]
        proxy.destroy()
        assert server.proxies() == {}
    finally:
        process.send_signal(stop_with)
        process.wait(timeout=30)
    assert process.returncode == 0, output.rest()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_port_in_use_is_one_line_and_exit_status_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "pytest_rollout_chaos.cli", "toxiproxy", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    assert f"rollout-chaos toxiproxy: cannot listen on 127.0.0.1:{port}:" in result.stderr
    assert "Traceback" not in result.stderr
