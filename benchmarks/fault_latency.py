"""Fault-to-verdict latency: from SIGKILL of the agent mid-collection until the reference collector raises.

The full proxied stack runs; each of ``repeats`` trials starts a collection of calculator
rows, waits until the agent has a ``/run`` in flight, sends SIGKILL to the agent's process
group and times how long the collector takes to raise. The Gym client, like NeMo Gym's, has no
deadline and retries the dead agent forever, so the verdict is due at the collector's own
request deadline (``REQUEST_TIMEOUT_S``); this measures that it comes then, not later. The
agent is restarted between trials. Goal: within the deadline plus 1 s, median and worst.
"""

from __future__ import annotations

import asyncio
import signal
import tempfile
import time
from pathlib import Path

from benchmarks._collect import collect, greedy_rows
from benchmarks._result import Number, Result, median_and_worst
from benchmarks._stack import running_stack
from pytest_rollout_chaos.collector.protocol import CollectorSettings
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.stack import ChaosStack

AGENT = "calculator_agent"
REQUEST_TIMEOUT_S = 2.0
GOAL_S = REQUEST_TIMEOUT_S + 1.0
SETTINGS = CollectorSettings(request_timeout_s=REQUEST_TIMEOUT_S, collect_timeout_s=2 * REQUEST_TIMEOUT_S)
IN_FLIGHT_TIMEOUT_S = 30.0


def run(*, repeats: int = 10, rows: int = 16) -> Result:
    # At most max_concurrency rows, so every row is in flight when the agent dies: one deadline.
    with tempfile.TemporaryDirectory(prefix="bench-fault-") as log_dir, running_stack(Path(log_dir)) as timed:
        latencies: list[float] = []
        outcomes: list[str] = []
        for _ in range(repeats):
            latency_s, outcome = asyncio.run(_one_trial(timed.stack, rows))
            outcomes.append(outcome)
            if latency_s is not None:
                latencies.append(latency_s)
            # Always: right after SIGKILL the child may not be reaped yet and still look alive.
            timed.stack.servers()[AGENT].restart()
    if not latencies:
        return Result("fault_to_verdict", skipped=f"the collector never raised: {outcomes[:3]}")
    median_s, worst_s = median_and_worst(latencies)
    return Result(
        "fault_to_verdict",
        (
            Number("median", median_s, "s", GOAL_S, "at_most"),
            Number("worst", worst_s, "s", GOAL_S, "at_most"),
        ),
        details={"latencies_s": latencies, "outcomes": outcomes, "trials": repeats},
    )


async def _one_trial(stack: ChaosStack, n_rows: int) -> tuple[float | None, str]:
    """Latency from SIGKILL to the collector raising, and what it raised (None: it did not raise)."""
    rows = greedy_rows(stack.gym, "calculator", n_rows)
    watch = History()
    for path in stack.events_files():  # the fault layer records every /run the agents get
        watch.follow(path)
    task = asyncio.create_task(collect(stack, ReferenceCollector, rows, settings=SETTINGS))
    await _until_run_in_flight(watch, task)
    stack.servers()[AGENT].signal(signal.SIGKILL)
    killed = time.perf_counter()
    collected = await task
    latency_s = time.perf_counter() - killed
    if collected.raised is None:
        return None, f"returned {len(collected.rollouts or [])} rollouts after the kill"
    return latency_s, f"{type(collected.raised).__name__}: {collected.raised}"[:200]


async def _until_run_in_flight(watch: History, task: asyncio.Task[object]) -> None:
    deadline = time.monotonic() + IN_FLIGHT_TIMEOUT_S
    while not watch.events(source="agent", kind="invoke", op="POST /run"):
        if task.done() or time.monotonic() > deadline:
            raise RuntimeError("no /run reached the agent; the collection is not running")
        await asyncio.sleep(0.005)
