"""HostNet: the hosts of ``hosts:N``, Linux namespaces on this machine that act as machines of their own.

Host k is a network namespace (``rc<S>-h<k>``) joined by a veth pair (``rc<S>-v<k>`` on this side,
``eth0`` inside) to a bridge the run creates (``rc-br<S>``) on the private subnet
``10.213.<S>.0/24``: pytest, the driver, stays in the root namespace on the bridge's address
``10.213.<S>.1``, host k has ``10.213.<S>.<k+2>``. Traffic between them stays on that bridge.
S is claimed by creating the bridge, whose name carries it, so runs side by side (xdist workers)
get subnets of their own.

What runs on a host is started through ``boot_argv``: in the host's network namespace, in a PID
namespace of its own whose first process is the command (when it dies the kernel kills everything
of the host at once), and in a mount namespace with a fresh tmpfs over ``/tmp``, ``/dev/shm`` and
the run's directories. So a host shares nothing with the driver or the other hosts but the network
(and the installed software), and a host booted again starts with an empty ``/tmp``, as a machine
after a reboot.

Partitions need no firewall: ``cut`` adds routing rules in the two hosts' namespaces. Packets
arriving from the other side are dropped by ``blackhole`` rules, one per protocol so that ARP is
still answered (the kernel's ``local`` lookup is moved behind them at creation), and packets sent to
it are routed into ``void0``, a veth whose peer is down, which drops them without a word. Either way
nothing answers: connections hang, as across a real partition. The proxies in front of every server
run on the driver, so the traffic between two hosts' servers passes it; ``cut`` also drops, on each
side, what the driver's proxies to the other side's servers send (by their source port) and what is
sent to them.

Every namespace and link is registered with the session reaper before it is created, so a pytest
killed outright leaves none behind (``servers.reaper``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.ray.nodes import RayClusterError
from pytest_rollout_chaos.servers.reaper_client import reaper

PREFIX: Final = "10.213"  # private (RFC 1918); the run's subnet is 10.213.<S>.0/24
SUBNETS: Final = range(1, 255)
FIRST_HOST: Final = 2  # host k has 10.213.<S>.<k + FIRST_HOST>; .1 is the driver's
VOID_TABLE: Final = 213  # the routing table that sends into void0
RULE_PREF: Final = 10  # the cut's rules, ahead of the ``local`` lookup (moved to LOCAL_PREF)
LOCAL_PREF: Final = 100
IP_TIMEOUT_S: Final = 10.0
TMPFS: Final = "rollout-chaos-host"
# A host's own, empty on every boot: what this machine keeps there a host does not see (``host_paths``).
PRIVATE_MOUNTS: Final = (Path("/tmp"), Path("/dev/shm"))
# An isolated host: nothing in from the bridge, nothing out to anywhere (ahead of a cut's rules).
# Rules that drop what comes in name its protocols: the kernel answers ARP only for an address its
# input route lookup (protocol 0) finds local, and a peer that gets no ARP answer is told "no route
# to host" within seconds, where a gone machine behind a router says nothing at all.
PROTOCOLS: Final = ("tcp", "udp", "icmp")
ISOLATED: Final = (
    *(["pref", "5", "iif", "eth0", "ipproto", protocol, "blackhole"] for protocol in PROTOCOLS),
    ["pref", "6", "iif", "lo", "lookup", str(VOID_TABLE)],  # what it sends itself, nothing it receives
)


class HostNetError(RayClusterError):
    """The hosts' network could not be made, changed or removed."""


def missing() -> list[str]:
    """What ``hosts:N`` needs that this machine lacks, in words; ``[]`` when all is there.

    Looks only: root, ``ip`` and ``unshare``, then one throwaway namespace (gone when the probe
    exits) in which everything the hosts use is tried once: a bridge, a veth, the routing rules a
    cut adds, a PID namespace and a tmpfs.
    """
    if not Path("/proc/self/ns/net").exists():
        return ["Linux network namespaces (/proc/self/ns/net is missing: not Linux?)"]
    lacking = []
    if os.geteuid() != 0:
        lacking.append(f"root (this process runs as uid {os.geteuid()}; namespaces and links need it)")
    for program, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(program) is None:
            lacking.append(f"`{program}` ({package}) on PATH")
    if lacking:
        return lacking
    probe = " && ".join(
        [
            "ip link add rc-probe-br type bridge",
            "ip link add rc-probe-a type veth peer name rc-probe-b",
            "ip link set lo up",
            "ip link set rc-probe-a arp off up",
            f"ip rule add pref {RULE_PREF} from 10.213.0.1 iif lo ipproto tcp sport 1 blackhole",
            f"ip route add default dev rc-probe-a table {VOID_TABLE}",
            f"mount -t tmpfs {TMPFS} /tmp",
        ]
    )
    argv = ["unshare", "--net", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child"]
    try:
        done = subprocess.run(
            [*argv, "sh", "-c", probe], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return [f"namespaces made with `unshare` ({error})"]
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return [
            "namespaces with a bridge, veths, routing rules by port (iproute2 4.17+) and a tmpfs: "
            f"`{probe}` in a new namespace failed: {why[0]}"
        ]
    return []


@dataclass
class HostNet:
    """The bridge and the hosts' namespaces of one run; see the module docstring."""

    subnet: int
    count: int
    _cuts: dict[tuple[int, int], list[tuple[str, list[str]]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- names and addresses ------------------------------------------------------------------
    @property
    def bridge(self) -> str:
        return f"rc-br{self.subnet}"

    @property
    def driver_address(self) -> str:
        """The driver's address on the bridge, where the hosts reach pytest."""
        return f"{PREFIX}.{self.subnet}.1"

    def address(self, host: int) -> str:
        return f"{PREFIX}.{self.subnet}.{host + FIRST_HOST}"

    def netns(self, host: int) -> str:
        return f"rc{self.subnet}-h{host}"

    def veth(self, host: int) -> str:
        """The host's veth on the driver's side (on the bridge); inside the host it is ``eth0``."""
        return f"rc{self.subnet}-v{host}"

    def describe(self) -> str:
        hosts = ", ".join(f"{self.netns(k)} {self.address(k)}" for k in range(self.count))
        return f"bridge {self.bridge} {self.driver_address}/24, hosts {hosts}"

    # -- creating and removing -----------------------------------------------------------------
    @classmethod
    def open(cls, count: int, run_id: str) -> HostNet:
        """Claim a subnet (its bridge) and make ``count`` hosts on it; on failure leave nothing."""
        start = zlib.crc32(run_id.encode()) % len(SUBNETS)
        taken = _addresses_in_use()
        for step in range(len(SUBNETS)):
            subnet = SUBNETS[(start + step) % len(SUBNETS)]
            if f"{PREFIX}.{subnet}." in taken:
                continue
            net = cls(subnet, count)
            reaper().add_link(net.bridge)
            if _ip("link", "add", net.bridge, "type", "bridge", check=False) != 0:
                reaper().remove_link(net.bridge)
                continue  # another run's (or a leftover): the next subnet
            try:
                net._create()
            except BaseException:
                net.close()
                raise
            return net
        raise HostNetError(f"no free subnet {PREFIX}.S.0/24 for the hosts' bridge (S from 1 to 254)")

    def _create(self) -> None:
        _ip("addr", "add", f"{self.driver_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for host in range(self.count):
            name, veth, inside = self.netns(host), self.veth(host), f"rc{self.subnet}-p{host}"
            reaper().add_netns(name)
            reaper().add_link(veth)
            _ip("netns", "add", name)
            _ip("link", "add", veth, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", name)
            _ip("link", "set", veth, "master", self.bridge, "up")
            for args in (
                ("link", "set", inside, "name", "eth0"),
                ("addr", "add", f"{self.address(host)}/24", "dev", "eth0"),
                ("link", "set", "eth0", "up"),
                ("link", "set", "lo", "up"),
                # void0: a veth whose peer stays down drops what is routed into it, silently
                ("link", "add", "void0", "type", "veth", "peer", "name", "void1"),
                ("link", "set", "void0", "arp", "off", "up"),
                ("route", "add", "default", "dev", "void0", "table", str(VOID_TABLE)),
                # the cut's rules must come before the lookup that accepts what is for this host
                ("rule", "add", "pref", str(LOCAL_PREF), "lookup", "local"),
                ("rule", "del", "pref", "0"),
            ):
                _ip("-n", name, *args)

    def close(self) -> None:
        """Remove every host (its processes killed first) and the bridge; idempotent."""
        for host in range(self.count):
            self.kill(host)
            _ip("netns", "del", self.netns(host), check=False)
            _ip("link", "del", self.veth(host), check=False)  # gone with its peer, unless half made
            reaper().remove_netns(self.netns(host))
            reaper().remove_link(self.veth(host))
        _ip("link", "del", self.bridge, check=False)
        reaper().remove_link(self.bridge)

    # -- what runs on a host ---------------------------------------------------------------------
    def boot_argv(self, host: int, argv: Sequence[str], private: Sequence[Path]) -> tuple[str, ...]:
        """``argv`` run on ``host``: its network, a PID namespace it is the first process of, a mount
        namespace with a fresh tmpfs over ``/tmp``, ``/dev/shm`` and each of ``private``."""
        own = [path for path in private if not any(_under(path, mount) for mount in PRIVATE_MOUNTS)]
        mounts = [str(path) for path in (*PRIVATE_MOUNTS, *own)]
        script = " && ".join(
            [*(f"mount -t tmpfs -o mode=1777 {TMPFS} {shlex.quote(path)}" for path in mounts), 'exec "$@"']
        )
        unshare = ("unshare", "--pid", "--kill-child", "--mount-proc", "--mount", "--propagation", "private")
        return ("ip", "netns", "exec", self.netns(host), *unshare, "sh", "-c", script, "sh", *argv)

    def pids(self, host: int) -> list[int]:
        """Every process in ``host``'s network namespace (as this machine numbers them)."""
        try:
            done = subprocess.run(
                ["ip", "netns", "pids", self.netns(host)],
                capture_output=True,
                text=True,
                timeout=IP_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [int(line) for line in done.stdout.split() if line.isdigit()]

    def kill(self, host: int) -> int:
        """SIGKILL every process of ``host`` (a few rounds, for one caught forking); how many there were."""
        killed: set[int] = set()
        for _ in range(5):
            pids = self.pids(host)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            killed.update(pids)
        return len(killed)

    # -- faults between hosts ---------------------------------------------------------------------
    def isolate(self, host: int) -> None:
        """Silence ``host``: every packet that comes to it is dropped, everything it sends goes into
        ``void0``. It still answers ARP, so a connection to it times out rather than being told there
        is no route: a machine that is gone, seen from across a routed network."""
        for rule in ISOLATED:
            _ip("-n", self.netns(host), "rule", "add", *rule)

    def forget(self, host: int) -> None:
        """Close, on the driver and on every other host, each connection to ``host`` (``ss -K``): what
        their keepalives find while a lost machine reboots, which takes longer than the moment
        ``restore_host`` takes. Left open, the first packet of such a stream after ``rejoin`` meets
        the new kernel's RST, and Ray's GCS has been seen to abort on it (``pure virtual method
        called`` in its syncer) while the restarted node registers, taking the driver with it."""
        address = self.address(host)
        _ss_kill("dst", address)
        for other in range(self.count):
            if other != host:
                _ss_kill("dst", address, netns=self.netns(other))

    def rejoin(self, host: int) -> None:
        """Undo ``isolate``; idempotent."""
        for rule in ISOLATED:
            _ip("-n", self.netns(host), "rule", "del", *rule, check=False)

    def cut(self, a: int, b: int, *, ports_to: Mapping[int, Sequence[int]]) -> int:
        """Partition hosts ``a`` and ``b``, both ways; ``ports_to[h]``: the driver's proxy ports that
        lead to servers on ``h``, which the other side may no longer reach. Returns the rules added."""
        if a == b:
            raise HostNetError(f"host {a} cannot be cut from itself")
        key = (min(a, b), max(a, b))
        with self._lock:
            if key in self._cuts:
                return 0
            added: list[tuple[str, list[str]]] = []
            self._cuts[key] = added
            for here, there in ((a, b), (b, a)):
                rules = cut_rules(self.address(there), self.driver_address, ports_to.get(there, ()))
                for rule in rules:
                    _ip("-n", self.netns(here), "rule", "add", *rule)
                    added.append((self.netns(here), rule))
            return len(added)

    def mend(self, a: int, b: int) -> None:
        """Undo ``cut(a, b)``; idempotent (a rule already gone is left alone)."""
        with self._lock:
            added = self._cuts.pop((min(a, b), max(a, b)), [])
        for netns, rule in added:
            _ip("-n", netns, "rule", "del", *rule, check=False)


def cut_rules(peer: str, driver: str, proxy_ports: Sequence[int]) -> list[list[str]]:
    """The routing rules one side of a cut adds: nothing from ``peer`` comes in, nothing to it goes
    out; likewise for the driver's proxies at ``proxy_ports`` (which lead to ``peer``'s servers)."""
    pref = ["pref", str(RULE_PREF)]
    rules = [
        [*pref, "from", f"{peer}/32", "iif", "eth0", "ipproto", protocol, "blackhole"]
        for protocol in PROTOCOLS
    ]
    rules.append([*pref, "to", f"{peer}/32", "lookup", str(VOID_TABLE)])
    for port in sorted(set(proxy_ports)):
        tcp = ["ipproto", "tcp"]
        rules.append([*pref, "from", f"{driver}/32", "iif", "eth0", *tcp, "sport", str(port), "blackhole"])
        rules.append([*pref, "to", f"{driver}/32", *tcp, "dport", str(port), "lookup", str(VOID_TABLE)])
    return rules


def _ip(*args: str, check: bool = True) -> int:
    """Run ``ip ARGS``; ``HostNetError`` with its message when it fails and ``check``."""
    try:
        done = subprocess.run(
            ["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        if check:
            raise HostNetError(f"`ip {shlex.join(args)}` failed: {error}") from None
        return -1
    if check and done.returncode != 0:
        raise HostNetError(f"`ip {shlex.join(args)}` failed: {done.stderr.strip() or done.returncode}")
    return done.returncode


def _ss_kill(*selector: str, netns: str | None = None) -> None:
    """Destroy the TCP sockets ``ss`` selects (in ``netns``, else here); best effort: a kernel without
    socket destroy leaves them to their keepalives."""
    argv = ["ss", "-K", *selector]
    if netns is not None:
        argv = ["ip", "netns", "exec", netns, *argv]
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(argv, capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False)


def _addresses_in_use() -> str:
    """Every IPv4 address on this machine's interfaces, as ``ip -o -4 addr`` prints them."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        return subprocess.run(
            ["ip", "-o", "-4", "addr"], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
        ).stdout
    return ""


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents
