"""restart against a real server: a new process on the same port, within a bounded time."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.faults.restart import Restart
from tests.faults._applied import applied
from tests.faults._hooked import Hooked


@pytest.mark.asyncio
async def test_new_pid_same_port(own_hooked: Hooked) -> None:
    ctx, history = own_hooked.context()
    process = own_hooked.process
    before, port = process.pid, process.address()
    async with applied(Restart(target="hooked"), ctx) as facts:
        assert (await own_hooked.post("/run", {}))[0] == 200
    assert facts["pid_before"] == before
    assert facts["pid_after"] == process.pid != before
    assert port is not None
    assert process.address() == port
    assert facts["port"] == port[1]
    assert 0 < float(str(facts["down_s"])) < 10
    assert [event.op for event in history.events(source="fault")] == ["inject", "heal"]
