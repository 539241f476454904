"""A gate stopped while both sides run (Ctrl-C, or SIGTERM from a CI runner) stops both children.

The gate runs as a user's would, in a process of its own, over two trees whose collector waits on
a frozen agent with no deadline of its own: left alone, each side would run for ten minutes. Once
both sides' servers are up the gate is signalled; it must end, having stopped each side itself
(each side says it is done), and leave no process it started behind.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_rollout_chaos.servers.procfs import alive, descendant_pids

pytestmark = pytest.mark.slow  # two pytest children, each starting the stack

REPO = Path(__file__).resolve().parents[2]
TARGET = "gated_trainer.collector:factory"
COLLECTOR = "fixtures.collectors.no_deadline"  # awaits every /run for as long as it takes
HANGS_S = 600  # what each side would run for if nobody stopped it
STARTED_S = 240.0  # far more than two stacks take to start on a busy machine
ENDED_S = 120.0  # far less than HANGS_S: the gate stops the sides, they do not end by themselves
# The agent frozen for the whole collection; the collector awaits its /run without a deadline.
FROZEN = f"""name: agent-frozen-for-good
description: the agent frozen all along, for a collector that never gives up on a row
workload:
  rows_per_task: 2
  tasks: [calculator]
faults:
  - kind: freeze
    target: agent
    at: start
expect:
  invariants: [bounded]
  within_s: {HANGS_S}
"""


def _tree(root: Path) -> Path:
    package = root / "gated_trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "collector.py").write_text(f"from {COLLECTOR} import factory  # noqa: F401\n")
    return root


def _lines(stream: object) -> queue.Queue[str | None]:
    """The gate's stderr, a line at a time (None at its end), read on a thread of its own."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for_servers(lines: queue.Queue[str | None], seen: list[str]) -> None:
    """Until both sides said their last server is ready (the head server of the Gym stack)."""
    waiting = {"[base] rollout-chaos: gym_head ready", "[head] rollout-chaos: gym_head ready"}
    deadline = time.monotonic() + STARTED_S
    while waiting:
        line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        assert line is not None, "the gate ended before both sides were up:\n" + "\n".join(seen)
        seen.append(line)
        waiting = {prefix for prefix in waiting if not line.startswith(prefix)}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signalled_gate_stops_both_sides_and_leaves_nothing_running(
    tmp_path: Path, sig: signal.Signals
) -> None:
    scenario = tmp_path / "agent-frozen-for-good.chaos.yaml"
    scenario.write_text(FROZEN)
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    gate = subprocess.Popen(
        [sys.executable, "-m", "pytest_rollout_chaos.cli", "gate", "--target", TARGET,
         "--base", str(base), "--head", str(head), "--runs", "1", "--workdir", str(tmp_path / "work"),
         str(scenario)],
        cwd=REPO,  # the trees' collector imports the known-bug collectors from fixtures/
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    started: set[int] = set()
    seen: list[str] = []
    try:
        lines = _lines(gate.stderr)
        _wait_for_servers(lines, seen)
        started = descendant_pids(gate.pid)
        gate.send_signal(sig)
        gate.wait(timeout=ENDED_S)
        while (line := lines.get(timeout=ENDED_S)) is not None:
            seen.append(line)
        deadline = time.monotonic() + ENDED_S  # a reaper may still be killing what it watched
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = sorted(pid for pid in started if alive(pid))
    finally:
        gate.kill()
        gate.wait(timeout=ENDED_S)
        if gate.stderr is not None:
            gate.stderr.close()
        for pid in started:  # whatever outlived the gate, so that a failure leaves nothing either
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    text = "\n".join(seen)
    assert f"base {base.resolve()} at the same time as head {head.resolve()}" in text, text
    assert gate.returncode != 0, text
    # each side was stopped by the gate, which then said so, before the gate ended
    for label in ("base", "head"):
        told = [line for line in seen if line.startswith(f"[{label}] done in ")]
        assert told, text
        assert told[0].endswith("(stopped)"), text
    assert started, "the gate had started its sides' children"
    assert not left, f"still running after the gate ended: {left}\n{text}"
