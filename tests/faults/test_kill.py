"""kill against a real server: SIGKILL, recorded as a process exit, back on its port after heal."""

from __future__ import annotations

import signal

import pytest

from pytest_rollout_chaos.faults.kill import Kill
from tests.faults._applied import applied
from tests.faults._hooked import Hooked, wait_for


@pytest.mark.asyncio
async def test_sigkill_then_restart_on_the_same_port(own_hooked: Hooked) -> None:
    ctx, history = own_hooked.context()
    process = own_hooked.process
    pid, port = process.pid, process.address()
    async with applied(Kill(target="hooked"), ctx) as facts:
        assert not process.is_running()
        assert process.exit_code() == -signal.SIGKILL
    assert facts == {"pid": pid, "signal": 9, "code": 137}
    assert process.is_running()
    assert process.pid != pid
    assert process.address() == port, "healing restarts on the same port so proxies keep working"
    assert (await own_hooked.post("/run", {}))[0] == 200
    exits = wait_for(history, lambda event: event.source == "process" and event.op == "exit")
    assert exits[0].data == {"server": "hooked", "code": 137, "signal": 9}
    ops = [event.op for event in history.events(source="fault")]
    assert ops == ["inject", "restart", "heal"]


@pytest.mark.asyncio
async def test_without_restart_on_heal_the_server_stays_down(own_hooked: Hooked) -> None:
    ctx, _ = own_hooked.context()
    async with applied(Kill(target="hooked", restart_on_heal=False), ctx):
        pass
    assert not own_hooked.process.is_running()
    own_hooked.process.ensure_running()  # a fault's kill is expected: no ServerCrashedError
