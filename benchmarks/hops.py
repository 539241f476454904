"""What one hop costs a request: the fault layer and Toxiproxy against a direct wire and two floors.

A canned upstream (``_hop_servers upstream``) answers vLLM-like chat/completions answers with
per-token logprobs, about 5 KB and 256 KB (2048-odd tokens, what a GPU policy sends back), and
a keep-alive client (``_hop_client``) asks for them one at a time along each path:

- ``direct``: straight to the upstream;
- ``compiled floor``: through Debian's ``haproxy`` in ``mode tcp`` (one thread), when installed;
- ``python floor``: through a bare uvloop splice (``_hop_servers splice``): what any Python relay
  costs before it does anything;
- ``toxiproxy``: through a proxy of the embedded Toxiproxy, no toxics;
- ``layer``: through a link of the fault layer, nothing armed (it records every request);
- ``layer, 2 processes``: through a link of a second fault layer run as two processes
  (``--processes 2``: the main one deciding, a worker beside it, the kernel spreading the
  connections), so the burst shows what a second core buys; its worker decides alone, as no
  rule is armed and no row known;
- ``layer, 2 processes, asking``: the same with a rule armed that matches nothing, so its worker
  asks the main process for every request's row and rules, as once a collection's rows are known.
  The keep-alive connection of a path's blocks lands on one of its processes (the JSON's
  ``answers_per_process`` says which: the blocks are most of its answers), so their latency and
  CPU are that process's; the burst's 64 connections spread over both;
- ``toxiproxy+layer``: both, as every link of a stack runs.

Each round runs a block of each path at each size, the order of the paths reversed every other
round, so every path sees the same background load; the latencies over direct are the
differences of the pooled percentiles. Beside them, each relay's CPU per request, from the
kernel's per-thread run time (``/proc/<pid>/task/*/schedstat``) over its blocks, and a burst:
64 large answers the upstream releases at once, 64 connections, time from the release to the
last answer's last byte at the client (median over rounds, over direct's).

Every request that went through the layer must be in its History with the fingerprint and
logprob digest of the answer it got: a layer cannot get cheap by recording less. A request
missing from it fails the benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import statistics
import sys
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from benchmarks._hop_client import Connection, burst, timed
from benchmarks._hop_servers import SIZES, answer_of_size
from benchmarks._result import Number, Result
from pytest_rollout_chaos.history import History, fingerprint, logprob_digest
from pytest_rollout_chaos.servers import procfs, readiness
from pytest_rollout_chaos.servers.faultlayer import client as layer_api
from pytest_rollout_chaos.servers.faultlayer.spec import events_files, fault_layer_spec
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.servers.ports import free_port
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient
from pytest_rollout_chaos.servers.toxiproxy.spec import embedded_spec

REPO: Final = Path(__file__).resolve().parents[1]
BURST: Final = 64
GOAL_OVER_FLOOR_US: Final = 250.0  # the layer's p50 at 5 KB over the compiled floor's
GOAL_CPU_PER_KB_US: Final = 10.0  # the layer's CPU per KB of a 256 KB answer
GOAL_BURST_S: Final = 0.25  # 64 x 256 KB through the layer, over direct
PROCESSES: Final = 2  # of the second layer: what a second core buys the burst
WARM_UP: Final = 2  # untimed requests opening each block (an upstream connection may have expired)
HAPROXY_CONFIG: Final = """\
global
    nbthread 1
    maxconn 4096
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
listen hop
    bind 127.0.0.1:{port}
    server upstream 127.0.0.1:{upstream}
"""


@dataclass(slots=True)
class HopPath:
    """One way from the client to the upstream: where it starts, the relays on it, what it measured."""

    name: str
    port: int
    relays: tuple[int, ...]  # pids whose CPU counts as this path's
    events: tuple[Path, ...] = ()  # the fault layer's events files: every request must be in them
    latency_s: dict[str, list[float]] = field(default_factory=lambda: {size: [] for size in SIZES})
    cpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SIZES, 0.0))
    timed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIZES, 0))
    burst_s: list[float] = field(default_factory=list)
    sent: list[tuple[str, str]] = field(default_factory=list)  # (request id, answer size) per request
    connection: Connection | None = None


def run(*, rounds: int = 8, small: int = 60, large: int = 12) -> Result:
    """``rounds`` rounds; per round and path, ``small`` 5 KB and ``large`` 256 KB requests, one burst."""
    with tempfile.TemporaryDirectory(prefix="bench-hops-") as log_dir, ProcessKeeper(Path(log_dir)) as keeper:
        root = Path(log_dir)
        upstream = keeper.start(program_spec("hop-upstream", "upstream"))
        up_port = port_of(upstream)
        splice = keeper.start(program_spec("hop-splice", "splice", str(up_port)))
        toxiproxy = keeper.start(embedded_spec(seed=0, name="hop-toxiproxy"))
        events_file = root / "layer.events.jsonl"
        layer = keeper.start(fault_layer_spec(events_file, name="hop-layer"))
        layer_port, behind_toxiproxy = (
            _link(layer.url, name, up_port) for name in ("client->policy", "toxiproxy->policy")
        )
        several = [_several(keeper, root, up_port, asking=asking) for asking in (False, True)]
        paths = [HopPath("direct", up_port, ())]
        haproxy = _haproxy(keeper, root, up_port)
        if haproxy is not None:
            paths.append(HopPath("compiled floor", port_of(haproxy), (haproxy.pid,)))
        paths.append(HopPath("python floor", port_of(splice), (splice.pid,)))
        details: dict[str, Any] = {
            "rounds": rounds,
            "requests_per_block": {"small": small, "large": large},
            "answer_bytes": {size: len(_encoded(size)) for size in SIZES},
            "compiled_floor": "haproxy (mode tcp, nbthread 1)" if haproxy else "haproxy: not installed",
        }
        proxied = asyncio.run(_toxiproxy_ports(toxiproxy.url, up_port, behind_toxiproxy))
        paths += [
            HopPath("toxiproxy", proxied[0], (toxiproxy.pid,)),
            HopPath("layer", layer_port, (layer.pid,), (events_file,)),
            *several,
            HopPath("toxiproxy+layer", proxied[1], (toxiproxy.pid, layer.pid), (events_file,)),
        ]
        _run_loop(_measure(paths, rounds, {"small": small, "large": large}))
        # how the kernel spread the connections: the requests each process of a layer answered
        details["answers_per_process"] = {
            path.name: [_answers_in(file) for file in path.events] for path in several
        }
        missing = _unrecorded(paths)
        if missing:
            raise RuntimeError(missing)
        return Result("hops", _numbers(paths), details={**details, **_raw(paths)})


def _several(keeper: ProcessKeeper, root: Path, up_port: int, *, asking: bool) -> HopPath:
    """A layer of ``PROCESSES`` processes and its path. ``asking``: with a rule armed that matches
    no request, so the workers ask the main process for every request's row and rules, as they do
    once a collection's rows are known (else they decide alone: no rule, no row)."""
    name = f"layer, {PROCESSES} processes" + (", asking" if asking else "")
    events_file = root / f"layer-{PROCESSES}{'-asking' if asking else ''}.events.jsonl"
    spec = fault_layer_spec(
        events_file, name=f"hop-{name.replace(', ', '-').replace(' ', '-')}", processes=PROCESSES
    )
    layer = keeper.start(spec)
    port = _link(layer.url, "client->policy", up_port)
    if asking:
        rule = {"server": "policy", "effect": "http_error", "match": {"route": "/never"}, "status": 500}
        layer_api.call_sync(layer.url, "POST", "/rules", rule, timeout_s=5.0)
    pids = (layer.pid, *sorted(procfs.descendant_pids(layer.pid)))
    return HopPath(name, port, pids, events_files(events_file, PROCESSES))


def _link(layer_url: str, name: str, up_port: int) -> int:
    """A new link of the layer at ``layer_url`` to the upstream; its port."""
    listen = layer_api.add_link(
        layer_url, name=name, server="policy", source="policy", upstream=f"http://127.0.0.1:{up_port}"
    )
    return int(listen.rpartition(":")[2])


def program_spec(name: str, *argv: str) -> ServerSpec:
    """A program of ``_hop_servers`` (``upstream``, or ``splice PORT``) as a server the keeper starts."""
    return ServerSpec(
        name=name,
        argv=(sys.executable, "-m", "benchmarks._hop_servers", *argv),
        probe=readiness.address_known(),
        cwd=REPO,
        ready_timeout_s=30.0,
    )


def _haproxy(keeper: ProcessKeeper, root: Path, up_port: int) -> ManagedProcess | None:
    binary = shutil.which("haproxy")
    if binary is None:
        return None
    port = free_port()
    config = root / "haproxy.cfg"
    return keeper.start(
        ServerSpec(
            name="hop-haproxy",
            argv=(binary, "-db", "-f", str(config)),
            probe=_listening,
            port=port,
            files={config: HAPROXY_CONFIG.format(port=port, upstream=up_port)},
        )
    )


def _listening(target: readiness.ProbeTarget) -> bool:
    """Ready once its port takes a connection."""
    address = target.address()
    if address is None:
        return False
    with socket.create_connection(address, timeout=1.0):
        return True


def port_of(process: ManagedProcess) -> int:
    address = process.address()
    assert address is not None, f"{process.name} started without an address"
    return address[1]


def _encoded(size: str) -> bytes:
    from benchmarks._hop_servers import encode

    return encode(answer_of_size(SIZES[size]))


async def _toxiproxy_ports(api_url: str, up_port: int, layer_port: int) -> tuple[int, int]:
    async with ToxiproxyClient(api_url) as api:
        ports = []
        for target in (up_port, layer_port):
            proxy = await api.create_proxy(f"hop-{uuid.uuid4().hex[:8]}", upstream=f"127.0.0.1:{target}")
            ports.append(proxy.listen_port)
        return ports[0], ports[1]


def _run_loop(coroutine: Any) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coroutine)
    else:
        uvloop.run(coroutine)


async def _measure(paths: list[HopPath], rounds: int, per_block: Mapping[str, int]) -> None:
    for path in paths:
        path.connection = await Connection.open("127.0.0.1", path.port)
    try:
        for round_index in range(rounds):
            order = paths if round_index % 2 == 0 else paths[::-1]
            for path in order:
                for size, count in per_block.items():
                    await _block(path, size, count)
            for path in order:
                took, replies = await burst("127.0.0.1", path.port, BURST)
                path.burst_s.append(took)
                path.sent += [(reply.request_id, "large") for reply in replies]
    finally:
        for path in paths:
            if path.connection is not None:
                path.connection.close()


async def _block(path: HopPath, size: str, count: int) -> None:
    assert path.connection is not None
    for _ in range(WARM_UP):
        path.sent.append(((await path.connection.ask(size)).request_id, size))
    before = _cpu_s(path.relays)
    for _ in range(count):
        took, reply = await timed(path.connection, size)
        path.latency_s[size].append(took)
        path.sent.append((reply.request_id, size))
    path.cpu_s[size] += _cpu_s(path.relays) - before
    path.timed[size] += count


def _cpu_s(pids: Iterable[int]) -> float:
    """CPU seconds these processes have run so far, every thread, to the nanosecond (``schedstat``)."""
    total_ns = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                total_ns += int((task / "schedstat").read_text().split()[0])
    return total_ns / 1e9


def _answers_in(events_file: Path) -> int:
    history = History()
    history.follow(events_file, from_now=False)
    return len(history.events(kind="ok"))


def _unrecorded(paths: Iterable[HopPath]) -> str:
    """Why a layer's History does not hold every request sent through it as answered, once, with
    the answer's generation and logprobs recorded; empty when each does."""
    by_layer: dict[tuple[Path, ...], list[HopPath]] = {}
    for path in paths:
        if path.events:
            by_layer.setdefault(path.events, []).append(path)
    return "; ".join(why for files, through in by_layer.items() if (why := _unrecorded_in(files, through)))


def _unrecorded_in(files: Iterable[Path], paths: Iterable[HopPath]) -> str:
    history = History()
    for events_file in files:
        history.follow(events_file, from_now=False)
    oks = history.events(kind="ok")
    answered = {event.request_id: event.data for event in oks}
    if len(oks) != len(answered):
        return f"the fault layer's History records answers more than once ({len(oks) - len(answered)} extra)"
    expected = {size: _expected_record(size) for size in SIZES}
    sent = [one for path in paths for one in path.sent]
    wrong = []
    for request_id, size in sent:
        data = answered.get(request_id, {})
        if {key: data.get(key) for key in expected[size]} != expected[size]:
            wrong.append(request_id)
    if not wrong:
        return ""
    return (
        f"the fault layer's History lacks {len(wrong)} of the {len(sent)} requests sent through it"
        f" (answered, with the answer's fingerprint and logprob digest): {', '.join(wrong[:5])}"
    )


def _expected_record(size: str) -> dict[str, list[str]]:
    """What the layer must record for an answer of this size: read from the canned document."""
    choice = answer_of_size(SIZES[size])["choices"][0]
    content = choice["logprobs"]["content"]
    ids = [int(item["token"].removeprefix("token_id:")) for item in content]
    return {"generations": [fingerprint(ids)], "logprobs": [logprob_digest([i["logprob"] for i in content])]}


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _numbers(paths: list[HopPath]) -> tuple[Number, ...]:
    direct = paths[0]
    direct_burst = statistics.median(direct.burst_s)
    numbers = [
        Number("direct p50, 5 KB", _percentile(direct.latency_s["small"], 0.5) * 1e6, "us"),
        Number("direct p50, 256 KB", _percentile(direct.latency_s["large"], 0.5) * 1e3, "ms"),
        Number(f"direct burst {BURST}x256 KB", direct_burst, "s"),
    ]
    by_name = {path.name: path for path in paths}
    for path in paths[1:]:
        for size, label, scale, unit in (("small", "5 KB", 1e6, "us"), ("large", "256 KB", 1e3, "ms")):
            for share, name in ((0.5, "p50"), (0.99, "p99")):
                over = _percentile(path.latency_s[size], share) - _percentile(direct.latency_s[size], share)
                numbers.append(Number(f"{path.name} {name} over direct, {label}", over * scale, unit))
        for size, label, scale, unit in (("small", "5 KB", 1e6, "us"), ("large", "256 KB", 1e3, "ms")):
            per_request = path.cpu_s[size] * scale / max(path.timed[size], 1)
            numbers.append(Number(f"{path.name} CPU/request, {label}", per_request, unit))
        numbers.append(
            Number(f"{path.name} burst over direct", statistics.median(path.burst_s) - direct_burst, "s")
        )
    layer = by_name["layer"]
    floor = by_name.get("compiled floor")
    if floor is not None:
        gap = _percentile(layer.latency_s["small"], 0.5) - _percentile(floor.latency_s["small"], 0.5)
        numbers.append(
            Number(
                "goal: layer p50 over compiled floor, 5 KB", gap * 1e6, "us", GOAL_OVER_FLOOR_US, "at_most"
            )
        )
    kb = len(_encoded("large")) / 1024
    per_kb_us = layer.cpu_s["large"] * 1e6 / max(layer.timed["large"], 1) / kb
    numbers.append(Number("goal: layer CPU/KB, 256 KB", per_kb_us, "us", GOAL_CPU_PER_KB_US, "at_most"))
    over = statistics.median(layer.burst_s) - direct_burst
    numbers.append(
        Number(f"goal: layer burst {BURST}x256 KB over direct", over, "s", GOAL_BURST_S, "at_most")
    )
    for several in paths:
        if several.name.startswith(f"layer, {PROCESSES} processes"):
            over_several = statistics.median(several.burst_s) - direct_burst
            label = several.name.removeprefix("layer, ")
            numbers.append(Number(f"layer burst over direct, {label} over 1", over_several / over, "x"))
    return tuple(numbers)


def _raw(paths: Iterable[HopPath]) -> dict[str, Any]:
    return {
        "paths": {
            path.name: {
                "p50_us": {size: round(_percentile(v, 0.5) * 1e6, 1) for size, v in path.latency_s.items()},
                "p99_us": {size: round(_percentile(v, 0.99) * 1e6, 1) for size, v in path.latency_s.items()},
                "cpu_s": path.cpu_s,
                "timed_requests": path.timed,
                "burst_s": [round(value, 4) for value in path.burst_s],
                "requests_sent": len(path.sent),
            }
            for path in paths
        }
    }
