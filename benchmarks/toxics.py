"""The toxics' timings through the embedded Toxiproxy: how close each comes to what it is set to.

The fast test loop asserts only that a toxic delays at least its nominal time and at most 5x of it
(it runs on busy shared machines); the exact numbers are measured here. A loopback TCP server
stands behind one proxy of an embedded Toxiproxy; each toxic is added, ``repeats`` transfers are
timed, and the toxic is removed. Each number is the median measured time over the nominal one
(1.00 is exact), with the worst in the details; the goal is within 20 % above the nominal.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from benchmarks._result import Number, Result
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy.client import ProxyInfo, ToxiproxyClient
from pytest_rollout_chaos.servers.toxiproxy.spec import embedded_spec

GOAL_RATIO: Final = 1.2
IO_TIMEOUT_S: Final = 10.0
BLAST_BYTES: Final = 50_000


@dataclass(frozen=True, slots=True)
class Case:
    """One toxic as the benchmark sets it, the time it should take, and how a transfer is timed."""

    label: str
    toxic: str
    attributes: dict[str, int]
    nominal_s: float
    transfer: str  # "roundtrip", "blast" (BLAST_BYTES then EOF), "close" (a request, then EOF or reset)


CASES: Final = (
    Case("latency 250 ms", "latency", {"latency": 250}, 0.25, "roundtrip"),
    Case("bandwidth 100 KB/s, 50 KB", "bandwidth", {"rate": 100}, BLAST_BYTES / 100_000, "blast"),
    Case("timeout 300 ms", "timeout", {"timeout": 300}, 0.3, "close"),
    Case("reset_peer 200 ms", "reset_peer", {"timeout": 200}, 0.2, "close"),
    Case("slow_close 300 ms", "slow_close", {"delay": 300}, 0.3, "blast"),
)


def run(*, repeats: int = 5) -> Result:
    with tempfile.TemporaryDirectory(prefix="bench-toxics-") as log_dir:
        process = ManagedProcess(embedded_spec(seed=0, name="toxiproxy"), Path(log_dir))
        process.start()
        try:
            measured = asyncio.run(_measure_all(process.url, repeats))
        finally:
            process.stop()
    numbers = tuple(
        Number(case.label, statistics.median(times) / case.nominal_s, "x nominal", GOAL_RATIO, "at_most")
        for case, times in zip(CASES, measured, strict=True)
    )
    details = {
        case.label: {"nominal_s": case.nominal_s, "times_s": [round(t, 4) for t in times]}
        for case, times in zip(CASES, measured, strict=True)
    }
    return Result("toxics", numbers, details=details)


async def _measure_all(api_url: str, repeats: int) -> list[list[float]]:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with ToxiproxyClient(api_url) as api:
            proxy = await api.create_proxy(f"bench-{uuid.uuid4().hex[:8]}", upstream=f"127.0.0.1:{port}")
            return [await _measure(api, proxy, case, repeats) for case in CASES]
    finally:
        server.close()
        await server.wait_closed()


async def _measure(api: ToxiproxyClient, proxy: ProxyInfo, case: Case, repeats: int) -> list[float]:
    toxic = await api.add_toxic(proxy.name, type=case.toxic, attributes=case.attributes)
    try:
        return [await _TRANSFERS[case.transfer](proxy) for _ in range(repeats)]
    finally:
        await api.remove_toxic(proxy.name, toxic.name)


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """``ping`` is echoed until EOF; ``blast`` sends BLAST_BYTES and closes."""
    try:
        while line := await reader.readline():
            if line.strip() == b"blast":
                writer.write(bytes(BLAST_BYTES))
                await writer.drain()
                return
            writer.write(line)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _timed(
    proxy: ProxyInfo, request: bytes, read: Callable[[asyncio.StreamReader], Awaitable[object]]
) -> float:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(proxy.listen_host, proxy.listen_port), IO_TIMEOUT_S
    )
    try:
        started = time.perf_counter()
        writer.write(request)
        await writer.drain()
        with contextlib.suppress(ConnectionResetError):  # reset_peer ends the transfer so
            await asyncio.wait_for(read(reader), IO_TIMEOUT_S)
        return time.perf_counter() - started
    finally:
        writer.transport.abort()


async def _roundtrip(proxy: ProxyInfo) -> float:
    return await _timed(proxy, b"ping\n", lambda reader: reader.readexactly(5))


async def _blast(proxy: ProxyInfo) -> float:
    return await _timed(proxy, b"blast\n", lambda reader: reader.read())


async def _close(proxy: ProxyInfo) -> float:
    return await _timed(proxy, b"ping\n", lambda reader: reader.read())


_TRANSFERS: Final[dict[str, Callable[[ProxyInfo], Awaitable[float]]]] = {
    "roundtrip": _roundtrip,
    "blast": _blast,
    "close": _close,
}
