"""Ctrl-C on pytest mid-collection: the collection fails loudly (no rollout lost silently) and no
server is left running.

An inner pytest run starts the real stack, hangs every ``/run`` with the ``hang`` fault, and
starts the reference collector; this test sends it SIGINT once collection is under way, then
reads what the inner run's History recorded and checks every server process is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
START_DEADLINE_S = 90.0
EXIT_DEADLINE_S = 30.0

INNER_CONFTEST = """
from tests.integration.collector.conftest import run, stack  # noqa: F401
"""

INNER_TEST = """
import asyncio, json, os
from pathlib import Path

import pytest

from pytest_rollout_chaos.collector.reference import ReferenceCollector
from tests.faults._applied import applied
from pytest_rollout_chaos.faults.hang import Hang

OUT = Path(os.environ["CANCEL_TEST_OUT"])


@pytest.fixture
def dump(run):
    yield
    events = [
        {"kind": e.kind, "op": e.op, "data": dict(e.data)}
        for e in run.ctx.history.events()
        if e.source in ("collector", "fault", "process")
    ]
    (OUT / "events.json").write_text(json.dumps(events, default=repr))


@pytest.mark.asyncio
async def test_collect_then_get_interrupted(run, dump):
    (OUT / "pids.json").write_text(json.dumps([p.pid for p in run.stack.servers().values()]))
    async with applied(Hang(target="calculator_agent"), run.faults):
        task = asyncio.ensure_future(
            ReferenceCollector(run.ctx).collect(run.stack.gym.rows("calculator", 4), mode="train")
        )
        while not run.ctx.history.events(source="agent", op="POST /run"):
            await asyncio.sleep(0.05)
        (OUT / "collecting").write_text("yes")
        await task
"""


def test_interrupting_pytest_mid_collection(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TEST)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CANCEL_TEST_OUT": str(tmp_path)}
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_inner.py"],
        cwd=pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while not (tmp_path / "collecting").exists():
            if inner.poll() is not None or time.monotonic() > deadline:
                output = inner.communicate(timeout=EXIT_DEADLINE_S)[0]
                pytest.fail(
                    f"inner run never started collecting (exit {inner.returncode}):\n{output[-3000:]}"
                )
            time.sleep(0.1)
        inner.send_signal(signal.SIGINT)
        output = inner.communicate(timeout=EXIT_DEADLINE_S)[0]
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait()
    assert inner.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    pids = json.loads((tmp_path / "pids.json").read_text())
    time.sleep(0.5)  # a killed group's last member may take a moment to be reaped
    alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert not alive, f"servers left running after Ctrl-C: {alive}"
    events = json.loads((tmp_path / "events.json").read_text())
    collect = [event for event in events if event["op"] == "collect"]
    assert [event["kind"] for event in collect] == ["invoke", "fail"], collect
    assert "cancel" in collect[1]["data"]["error"].lower()
    assert not [event for event in events if event["op"] == "rollout"], "no partial batch was handed back"
    assert any(event["op"] == "heal" for event in events), "the fault was healed on the way out"
