"""Harness overhead: rollouts/s through every layer of the harness (nothing armed) vs straight to the servers.

Four Gym stacks run side by side in front of one tiny policy server: one wired as the
``chaos_stack`` fixture wires it, a Toxiproxy proxy and a fault-layer listener on every link,
the collector's own to the policy included (the layer parses and records every request and
answer); one with the fault layer's listener alone on every link (its own layer process), which
splits the cost between the two hops; one with the Python floor on every link instead (a bare
uvloop splice per link, ``_hop_servers splice``: what any Python relay costs); one wired
directly. The same greedy rows are collected by the reference collector on each, in turn,
``rounds`` times (the order reversed every other round). The numbers are proxied rollouts/s
over the Python floor's and over direct's per round (the runs of a round are adjacent in time),
median over rounds; the goal is at least 0.93 of the Python floor (a straight wire is a bar no
Python relay clears: ``benchmarks/README.md``). Beside them, what each relay costs in CPU per
request it passed on (user and system time of its process, from ``/proc``, over all rounds):
numbers that barely move with the machine's load, where the ratios move by a tenth from one run
to the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks._collect import collect, greedy_rows, require_rollouts
from benchmarks._result import Number, Result
from benchmarks._stack import builder
from benchmarks.hops import port_of, program_spec
from pytest_rollout_chaos.collector.protocol import CollectorSettings
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.faultlayer.spec import NAME as FAULT_LAYER_NAME
from pytest_rollout_chaos.servers.gym.stack import direct_link
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy.spec import embedded_spec
from pytest_rollout_chaos.stack import ChaosStack

GOAL_FLOOR_RATIO = 0.93
# The Python floor's relays record nothing; the same rows on the same policy make the same
# requests as on the proxied stack, whose fault layer counts them.
COUNTED_AS = {"python floor": "proxied"}
SETTINGS = CollectorSettings(request_timeout_s=60.0, collect_timeout_s=300.0)


def run(*, rows: int = 32, rounds: int = 8) -> Result:
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as log_dir, contextlib.ExitStack() as stack:
        root = Path(log_dir)
        proxied = builder(stack, root)
        policy = proxied.policy_replicas[0]
        layer_only = builder(stack, root / "layer-only", policy=policy, links="layer")
        splices = SpliceLinks(stack.enter_context(ProcessKeeper(root / "splices")))
        floor = builder(stack, root / "python-floor", policy=policy, links=splices)
        direct = builder(stack, root / "direct", policy=policy, links=direct_link)
        stacks = {
            "direct": direct.stack,
            "proxied": proxied.stack,
            "layer only": layer_only.stack,
            "python floor": floor.stack,
        }
        relays: dict[str, dict[str, tuple[int, ...]]] = {
            "proxied": {
                "toxiproxy": (_named(proxied.keeper, embedded_spec(seed=0).name).pid,),
                "layer": (_named(proxied.keeper, FAULT_LAYER_NAME).pid,),
            },
            "layer only": {"layer": (_named(layer_only.keeper, FAULT_LAYER_NAME).pid,)},
            "python floor": {"splices": tuple(splices.pids)},
        }
        return asyncio.run(_measure(stacks, relays, rows, rounds))


async def _measure(
    stacks: dict[str, ChaosStack],
    relays: Mapping[str, Mapping[str, tuple[int, ...]]],
    n_rows: int,
    rounds: int,
) -> Result:
    for one in stacks.values():  # warm-up: first requests pay for connection setup and caches
        await collect(one, ReferenceCollector, greedy_rows(one.gym, "calculator", 2), settings=SETTINGS)
    per_round: list[dict[str, float]] = []
    relay_cpu_s = {(stack, relay): 0.0 for stack, pids in relays.items() for relay in pids}
    relayed = dict.fromkeys(relays, 0)  # requests each stack's relays passed on
    for round_index in range(rounds):
        order = list(stacks) if round_index % 2 == 0 else list(reversed(stacks))
        rates: dict[str, float] = {}
        for name in order:
            rows = greedy_rows(stacks[name].gym, "calculator", n_rows)
            pids = relays.get(name, {})
            before = {relay: _cpu_s(processes) for relay, processes in pids.items()}
            collected = await collect(stacks[name], ReferenceCollector, rows, settings=SETTINGS)
            for relay, processes in pids.items():
                relay_cpu_s[name, relay] += _cpu_s(processes) - before[relay]
            if pids and name not in COUNTED_AS:
                relayed[name] += _layer_requests(collected.history)
            rates[name] = len(require_rollouts(collected, f"overhead ({name})")) / collected.elapsed_s
        per_round.append(rates)
    # Each round's runs are adjacent in time, so their ratio sees the same background load;
    # the median over rounds drops the rounds a burst of load hit one side of.
    ratios = [rates["proxied"] / rates["direct"] for rates in per_round]
    layer_ratios = [rates["layer only"] / rates["direct"] for rates in per_round]
    floor_ratios = [rates["proxied"] / rates["python floor"] for rates in per_round]
    return Result(
        "overhead",
        (
            Number("direct", statistics.median(r["direct"] for r in per_round), "rollouts/s"),
            Number("proxied", statistics.median(r["proxied"] for r in per_round), "rollouts/s"),
            Number("python floor", statistics.median(r["python floor"] for r in per_round), "rollouts/s"),
            Number("proxied/python floor", statistics.median(floor_ratios), "", GOAL_FLOOR_RATIO, "at_least"),
            Number("proxied/direct", statistics.median(ratios), ""),
            Number("worst round", min(ratios), ""),
            Number("layer only/direct", statistics.median(layer_ratios), ""),
            Number(
                "python floor/direct",
                statistics.median(r["python floor"] / r["direct"] for r in per_round),
                "",
            ),
            *_per_request(relay_cpu_s, relayed),
        ),
        details={
            "rows": n_rows,
            "rounds": rounds,
            "per_round_rollouts_per_s": per_round,
            "ratios": ratios,
            "layer_only_ratios": layer_ratios,
            "proxied_over_python_floor": floor_ratios,
        },
    )


class SpliceLinks:
    """The Python floor on every link: each arrow gets a bare splice relay process of its own."""

    def __init__(self, keeper: ProcessKeeper) -> None:
        self._keeper = keeper
        self.pids: list[int] = []

    def __call__(self, name: str, upstream_url: str) -> str:
        upstream = urllib.parse.urlsplit(upstream_url)
        if upstream.hostname not in ("127.0.0.1", "localhost") or upstream.port is None:
            raise ValueError(f"link {name}: the splice relays to a loopback port only, not {upstream_url!r}")
        label = "".join(char if char.isalnum() else "-" for char in name)
        relay = self._keeper.start(program_spec(f"splice-{label}", "splice", str(upstream.port)))
        self.pids.append(relay.pid)
        return upstream._replace(netloc=f"127.0.0.1:{port_of(relay)}").geturl()


def _cpu_s(pids: tuple[int, ...]) -> float:
    """User and system CPU seconds these processes have used so far (Linux ``/proc``)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _layer_requests(history: History) -> int:
    """Requests the fault layer recorded in one collection (each passed every relay of its link once)."""
    return sum(1 for event in history.events() if event.kind == "invoke" and "link" in event.data)


def _per_request(cpu_s: Mapping[tuple[str, str], float], requests: Mapping[str, int]) -> Sequence[Number]:
    return [
        Number(
            f"{relay} CPU/request ({stack})", cpu * 1e6 / max(requests[COUNTED_AS.get(stack, stack)], 1), "us"
        )
        for (stack, relay), cpu in cpu_s.items()
    ]


def _named(keeper: ProcessKeeper, name: str) -> ManagedProcess:
    return next(process for process in keeper.processes if process.name == name)
