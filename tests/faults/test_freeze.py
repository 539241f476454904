"""freeze against a real server: stopped (state T, no answers), continued on heal."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rollout_chaos.faults.freeze import Freeze
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
