"""freeze against a real server: stopped (state T, no answers), continued on heal."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.freeze import Freeze
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.procfs import process_state
from tests.faults._applied import applied
from tests.faults._hooked import Hooked


@pytest.mark.asyncio
async def test_frozen_server_accepts_but_never_answers_until_healed(own_hooked: Hooked) -> None:
    ctx, _ = own_hooked.context()
    pid = own_hooked.process.pid
    async with applied(Freeze(target="hooked"), ctx) as facts:
        assert process_state(pid) == "T"
        with pytest.raises(asyncio.TimeoutError):
            await own_hooked.post("/run", {}, timeout_s=0.4)
    assert facts["pid"] == pid
    assert facts["stopped"] == facts["members"] == 1
    assert process_state(pid) in {"S", "R"}
    assert (await own_hooked.post("/run", {}))[0] == 200
    assert own_hooked.process.pid == pid, "freeze never restarts"


class ElsewhereProcess(ManagedProcess):
    """A server as a Ray host on a node of another machine reports it: not reachable through /proc."""

    @property
    def here(self) -> bool:
        return False

    def node(self) -> str:
        return "node 1 (ray node 0123abcd)"


@pytest.mark.asyncio
async def test_a_server_on_another_machine_is_refused_and_left_running(tmp_path: Path) -> None:
    elsewhere = Hooked.start(tmp_path, process_type=ElsewhereProcess)
    try:
        ctx, _ = elsewhere.context()
        with pytest.raises(FaultError, match=r"runs on node 1 \(ray node 0123abcd\), on another machine"):
            await Freeze(target="hooked").inject(ctx)
        assert process_state(elsewhere.process.pid) in {"S", "R"}
    finally:
        elsewhere.stop()
