"""exit_zero against a real server: asked by a signal, it shuts down on its own and exits 0."""

from __future__ import annotations

from typing import Literal

import pytest

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.exit_zero import ExitZero
from pytest_rollout_chaos.faults.registry import FaultParameterError
from tests.faults._applied import applied
from tests.faults._hooked import Hooked, wait_for


@pytest.mark.asyncio
@pytest.mark.parametrize("signal", ["SIGINT", "SIGTERM"])
async def test_server_exits_zero_and_comes_back_on_heal(
    own_hooked: Hooked, signal: Literal["SIGINT", "SIGTERM"]
) -> None:
    ctx, history = own_hooked.context()
    process = own_hooked.process
    pid, port = process.pid, process.address()
    async with applied(ExitZero(target="hooked", signal=signal), ctx) as facts:
        assert process.exit_code() == 0
    assert facts == {"pid": pid, "signal": signal, "code": 0}
    assert process.is_running()
    assert process.pid != pid
    assert process.address() == port
    assert (await own_hooked.post("/run", {}))[0] == 200
    exits = wait_for(history, lambda event: event.source == "process" and event.op == "exit")
    assert exits[0].data == {"server": "hooked", "code": 0, "signal": None}
    (inject,) = history.events(source="fault", op="inject")
    assert (inject.data["signal"], inject.data["code"]) == (signal, 0)


def test_only_signals_a_server_can_shut_down_on() -> None:
    with pytest.raises(FaultParameterError, match="signal: expected one of SIGINT, SIGTERM") as info:
        registry.build("exit_zero", {"target": "resources", "signal": "SIGKILL"})
    assert info.value.field == "signal"
    properties = registry.json_schema("exit_zero")["properties"]
    assert properties["signal"] == {
        "description": "the signal that asks the server process to shut down",
        "enum": ["SIGINT", "SIGTERM"],
        "default": "SIGINT",
    }
    assert properties["grace_s"]["minimum"] == 0.1
