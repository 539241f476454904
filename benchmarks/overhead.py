"""Harness overhead: rollouts/s through every layer of the harness (nothing armed) vs straight to the servers.

Three Gym stacks run side by side in front of one tiny policy server: one wired as the
``chaos_stack`` fixture wires it, a Toxiproxy proxy and a fault-layer listener on every link,
the collector's own to the policy included (the layer parses and records every request and
answer); one with the fault layer's listener alone on every link (its own layer process), which
splits the cost between the two hops; one wired directly. The same greedy rows are collected by
the reference collector on each, in turn, ``rounds`` times (the order reversed every other
round). The number is proxied rollouts/s divided by direct rollouts/s per round (the runs of a
round are adjacent in time), median over rounds; goal at least 0.9, and at least 0.8 in the
worst round. Beside it, what each relay costs in CPU per request it passed on (user and system
time of its process, from ``/proc``, over all rounds): numbers that barely move with the
machine's load, where the ratio moves by a tenth from one run to the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks._collect import collect, greedy_rows, require_rollouts
from benchmarks._result import Number, Result
from benchmarks._stack import builder
from pytest_rollout_chaos.collector.protocol import CollectorSettings
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.faultlayer.spec import NAME as FAULT_LAYER_NAME
from pytest_rollout_chaos.servers.gym.stack import direct_link
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy.spec import embedded_spec
from pytest_rollout_chaos.stack import ChaosStack

GOAL_RATIO = 0.9
GOAL_WORST = 0.8
SETTINGS = CollectorSettings(request_timeout_s=60.0, collect_timeout_s=300.0)


def run(*, rows: int = 32, rounds: int = 8) -> Result:
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as log_dir, contextlib.ExitStack() as stack:
        root = Path(log_dir)
        proxied = builder(stack, root)
        policy = proxied.policy_replicas[0]
        layer_only = builder(stack, root / "layer-only", policy=policy, links="layer")
        direct = builder(stack, root / "direct", policy=policy, links=direct_link)
        stacks = {"direct": direct.stack, "proxied": proxied.stack, "layer only": layer_only.stack}
        relays = {
            "proxied": {
                "toxiproxy": _named(proxied.keeper, embedded_spec(seed=0).name).pid,
                "layer": _named(proxied.keeper, FAULT_LAYER_NAME).pid,
            },
            "layer only": {"layer": _named(layer_only.keeper, FAULT_LAYER_NAME).pid},
        }
        return asyncio.run(_measure(stacks, relays, rows, rounds))


async def _measure(
    stacks: dict[str, ChaosStack], relays: Mapping[str, Mapping[str, int]], n_rows: int, rounds: int
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
            before = {relay: _cpu_s(pid) for relay, pid in pids.items()}
            collected = await collect(stacks[name], ReferenceCollector, rows, settings=SETTINGS)
            for relay, pid in pids.items():
                relay_cpu_s[name, relay] += _cpu_s(pid) - before[relay]
            if pids:
                relayed[name] += _layer_requests(collected.history)
            rates[name] = len(require_rollouts(collected, f"overhead ({name})")) / collected.elapsed_s
        per_round.append(rates)
    # Each round's runs are adjacent in time, so their ratio sees the same background load;
    # the median over rounds drops the rounds a burst of load hit one side of.
    ratios = [rates["proxied"] / rates["direct"] for rates in per_round]
    layer_ratios = [rates["layer only"] / rates["direct"] for rates in per_round]
    return Result(
        "overhead",
        (
            Number("direct", statistics.median(r["direct"] for r in per_round), "rollouts/s"),
            Number("proxied", statistics.median(r["proxied"] for r in per_round), "rollouts/s"),
            Number("proxied/direct", statistics.median(ratios), "", GOAL_RATIO, "at_least"),
            Number("worst round", min(ratios), "", GOAL_WORST, "at_least"),
            Number("layer only/direct", statistics.median(layer_ratios), ""),
            *_per_request(relay_cpu_s, relayed),
        ),
        details={
            "rows": n_rows,
            "rounds": rounds,
            "per_round_rollouts_per_s": per_round,
            "ratios": ratios,
            "layer_only_ratios": layer_ratios,
        },
    )


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _layer_requests(history: History) -> int:
    """Requests the fault layer recorded in one collection (each passed every relay of its link once)."""
    return sum(1 for event in history.events() if event.kind == "invoke" and "link" in event.data)


def _per_request(cpu_s: Mapping[tuple[str, str], float], requests: Mapping[str, int]) -> Sequence[Number]:
    return [
        Number(f"{relay} CPU/request ({stack})", cpu * 1e6 / max(requests[stack], 1), "us")
        for (stack, relay), cpu in cpu_s.items()
    ]


def _named(keeper: ProcessKeeper, name: str) -> ManagedProcess:
    return next(process for process in keeper.processes if process.name == name)
