"""The hosts of ``hosts:N`` without Ray: what is missing is named; a host has its own network and
``/tmp``; a cut silences two hosts both ways, and the driver's proxies to the other side, until it
is mended; an isolated host answers nothing, not even a refusal; nothing is left once closed."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rollout_chaos.ray import host_paths, netns
from pytest_rollout_chaos.ray.netns import HostNet, cut_rules

PROBE_S = 1.0  # a connection that does not answer within this is cut
# Listens on the host's address and its loopback, answers each connection with the host's view
# of /tmp, and says when it is ready.
LISTENER = textwrap.dedent(
    """\
    import os, socket, sys, threading
    from pathlib import Path
    Path("/tmp/written-on-the-host").write_text("x")
    def serve(host):
        server = socket.create_server((host, 7000))
        while True:
            client, _ = server.accept()
            client.sendall(",".join(sorted(os.listdir("/tmp"))).encode())
            client.close()
    for host in sys.argv[1:]:
        threading.Thread(target=serve, args=(host,), daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()
    """
)
PROBE = textwrap.dedent(
    """\
    import socket, sys
    try:
        connection = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    except OSError as error:
        print("cut" if isinstance(error, TimeoutError) else f"refused {error}")
        sys.exit()
    try:
        print("answered", connection.recv(1000).decode())
    except TimeoutError:
        print("answered")  # connected; this listener says nothing
    """
)


def test_missing_names_root_and_each_program(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "ip" else f"/usr/bin/{name}")
    assert netns.missing() == [
        "root (this process runs as uid 1000; namespaces and links need it)",
        "`ip` (iproute2) on PATH",
    ]


def test_a_cut_drops_what_comes_from_the_peer_and_what_goes_to_it_and_to_its_proxies() -> None:
    rules = cut_rules("10.213.5.3", "10.213.5.1", [4001, 4000, 4001])
    assert rules == [
        ["pref", "10", "from", "10.213.5.3/32", "iif", "eth0", "ipproto", "tcp", "blackhole"],
        ["pref", "10", "from", "10.213.5.3/32", "iif", "eth0", "ipproto", "udp", "blackhole"],
        ["pref", "10", "from", "10.213.5.3/32", "iif", "eth0", "ipproto", "icmp", "blackhole"],
        ["pref", "10", "to", "10.213.5.3/32", "lookup", "213"],
        [
            "pref",
            "10",
            "from",
            "10.213.5.1/32",
            "iif",
            "eth0",
            "ipproto",
            "tcp",
            "sport",
            "4000",
            "blackhole",
        ],
        ["pref", "10", "to", "10.213.5.1/32", "ipproto", "tcp", "dport", "4000", "lookup", "213"],
        [
            "pref",
            "10",
            "from",
            "10.213.5.1/32",
            "iif",
            "eth0",
            "ipproto",
            "tcp",
            "sport",
            "4001",
            "blackhole",
        ],
        ["pref", "10", "to", "10.213.5.1/32", "ipproto", "tcp", "dport", "4001", "lookup", "213"],
    ]


def test_a_host_runs_its_command_first_in_its_namespaces_with_its_own_tmp() -> None:
    net = HostNet(7, 2)
    argv = net.boot_argv(1, ["python", "-m", "x"], private=[Path("/tmp/pytest-1/logs"), Path("/srv/run")])
    assert argv[:4] == ("ip", "netns", "exec", "rc7-h1")
    assert argv[4:6] == ("unshare", "--pid")
    script = argv[argv.index("-c") + 1]
    mounts = [part.split()[-1] for part in script.split(" && ") if part.startswith("mount ")]
    assert mounts == ["/tmp", "/dev/shm", "/srv/run"]  # under /tmp is private already
    assert argv[-3:] == ("python", "-m", "x")
    assert (net.address(1), net.driver_address, net.veth(1), net.bridge) == (
        "10.213.7.3",
        "10.213.7.1",
        "rc7-v1",
        "rc-br7",
    )


@pytest.fixture
def hosts() -> Iterator[HostNet]:
    if lacking := netns.missing():
        pytest.skip(f"hosts:N needs {'; '.join(lacking)}")
    if hidden := host_paths.hidden(host_paths.interpreter_paths()):
        pytest.skip(f"a host's private /tmp would hide {'; '.join(path.describe() for path in hidden)}")
    net = HostNet.open(2, f"test-netns-{os.getpid()}")
    try:
        yield net
    finally:
        net.close()


def probe(net: HostNet, host: int | None, address: str, port: int, timeout_s: float = PROBE_S) -> str:
    """What a connection from ``host`` (None: the driver) to ``address:port`` gets."""
    argv = [sys.executable, "-c", PROBE, address, str(port), str(timeout_s)]
    if host is not None:
        argv = ["ip", "netns", "exec", net.netns(host), *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout.strip()


@pytest.mark.slow
def test_hosts_are_machines_of_their_own_and_a_cut_silences_them_until_mended(
    hosts: HostNet, tmp_path: Path
) -> None:
    argv = hosts.boot_argv(0, [sys.executable, "-c", LISTENER, hosts.address(0), "127.0.0.1"], [tmp_path])
    listener = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    proxy = socket.create_server((hosts.driver_address, 0))  # a driver's proxy to host 0's server
    port = proxy.getsockname()[1]
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == "ready"
        assert not Path("/tmp/written-on-the-host").exists(), "the host wrote to the driver's /tmp"
        assert probe(hosts, 1, hosts.address(0), 7000) == "answered written-on-the-host"
        assert probe(hosts, None, hosts.address(0), 7000).startswith("answered")
        assert probe(hosts, 1, "127.0.0.1", 7000).startswith("refused")  # its own loopback
        assert probe(hosts, 1, hosts.driver_address, port).startswith("answered")
        assert len(hosts.pids(0)) >= 2  # the namespaces' first process and the listener

        assert hosts.cut(0, 1, ports_to={0: [port]}) == 10
        assert probe(hosts, 1, hosts.address(0), 7000) == "cut"
        assert probe(hosts, 1, hosts.driver_address, port) == "cut"  # to the proxy of host 0's server
        assert probe(hosts, 0, hosts.driver_address, port).startswith("answered")  # not across the cut
        assert probe(hosts, None, hosts.address(0), 7000).startswith("answered")  # pytest reaches both

        hosts.mend(0, 1)
        hosts.mend(0, 1)  # idempotent
        assert probe(hosts, 1, hosts.address(0), 7000).startswith("answered")
        assert probe(hosts, 1, hosts.driver_address, port).startswith("answered")

        hosts.isolate(0)
        forget_neighbours(hosts)  # so the next connection asks ARP: a silent host still answers it
        assert probe(hosts, None, hosts.address(0), 7000, timeout_s=6.0) == "cut"  # not even "no route"
        assert probe(hosts, None, hosts.address(0), 7001) == "cut"  # where nothing listens: no RST either
        assert probe(hosts, 0, hosts.driver_address, port) == "cut"  # and nothing leaves it
        hosts.rejoin(0)
        hosts.rejoin(0)  # idempotent
        assert probe(hosts, None, hosts.address(0), 7000).startswith("answered")

        listener.kill()  # the first process of the host: the kernel ends everything in it
        listener.wait(timeout=10)
        deadline = time.monotonic() + 5
        while hosts.pids(0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hosts.pids(0) == []
    finally:
        proxy.close()
        if listener.poll() is None:
            listener.kill()
            listener.wait()
        assert listener.stdout is not None
        listener.stdout.close()
    hosts.close()
    listed = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert hosts.bridge not in listed
    assert not any(hosts.veth(k) in listed for k in range(2))
    assert not any(hosts.netns(k) in netns_list() for k in range(2))
    assert not any(f"/run/netns/{hosts.netns(k)}" in Path("/proc/mounts").read_text() for k in range(2))


def forget_neighbours(net: HostNet) -> None:
    """Drop what the driver's side of the bridge knows of the hosts' link addresses."""
    subprocess.run(["ip", "neigh", "flush", "dev", net.bridge], capture_output=True, check=False)


def netns_list() -> str:
    with contextlib.suppress(OSError):
        return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return ""


HOLDER = textwrap.dedent(
    """\
    import socket, sys, time
    server = socket.create_server((sys.argv[1], 7002))
    print("ready", flush=True)
    held = [server.accept()[0] for _ in range(2)]
    time.sleep(3600)
    """
)


def test_forgetting_a_lost_host_closes_its_peers_connections_to_it(hosts: HostNet, tmp_path: Path) -> None:
    argv = hosts.boot_argv(0, [sys.executable, "-c", HOLDER, hosts.address(0)], [tmp_path])
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    peer = hosts.boot_argv(1, [sys.executable, "-c", HELD_FROM_A_HOST, hosts.address(0)], [tmp_path])
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        with (
            socket.create_connection((hosts.address(0), 7002), timeout=PROBE_S) as driver,
            subprocess.Popen(peer, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True) as other,
        ):
            assert other.stdout is not None
            assert other.stdin is not None
            assert other.stdout.readline().strip() == "connected"
            hosts.isolate(0)  # lost: its peers' streams to it stay open, blackholed
            hosts.forget(0)
            with pytest.raises(ConnectionAbortedError):
                driver.send(b"x")
            other.stdin.write("send\n")
            other.stdin.flush()
            assert other.stdout.readline().strip().startswith("closed")
    finally:
        hosts.rejoin(0)
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()


HELD_FROM_A_HOST = textwrap.dedent(
    """\
    import socket, sys
    connection = socket.create_connection((sys.argv[1], 7002), timeout=2)
    print("connected", flush=True)
    sys.stdin.readline()
    try:
        connection.send(b"x")
        print("open", flush=True)
    except OSError as error:
        print("closed", error, flush=True)
    """
)
