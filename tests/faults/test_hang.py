"""hang against a real server behind the fault layer: no answer while armed; healing releases the waiter."""

from __future__ import annotations

import asyncio
import time

import pytest

from pytest_rollout_chaos.faults.apply import heal_recorded, inject_recorded
from pytest_rollout_chaos.faults.hang import Hang
from pytest_rollout_chaos.servers.faultlayer.client import LayerControl
from tests.faults._hooked import Hooked


@pytest.mark.asyncio
async def test_client_gives_up_while_armed(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    fault = Hang(target="hooked", route="/run")
    await inject_recorded(fault, ctx)
    try:
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await hooked.post("/run", {}, timeout_s=0.5)
        assert 0.45 <= time.monotonic() - started <= 2.25  # the client's own 0.5 s
    finally:
        await heal_recorded(fault, ctx)
    assert (await hooked.post("/run", {}))[0] == 200


@pytest.mark.asyncio
async def test_healing_releases_a_waiting_request_and_leaves_no_rule(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    fault = Hang(target="hooked", route="/run")
    await inject_recorded(fault, ctx)
    waiting = asyncio.create_task(hooked.post("/run", {"_rowidx": 5}, timeout_s=10.0))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    released_at = time.monotonic()
    await heal_recorded(fault, ctx)
    await heal_recorded(fault, ctx)  # idempotent
    status, _ = await asyncio.wait_for(waiting, 5.0)
    assert status == 200
    assert time.monotonic() - released_at < 1.0
    async with LayerControl(hooked.layer.url) as control:
        assert await control.rules() == []


@pytest.mark.asyncio
async def test_max_hang_bounds_the_wait(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    fault = Hang(target="hooked", route="/run", max_hang_s=0.4)
    await inject_recorded(fault, ctx)
    try:
        started = time.monotonic()
        status, _ = await hooked.post("/run", {}, timeout_s=5.0)
        assert status == 200
        assert 0.38 <= time.monotonic() - started <= 1.9  # max_hang_s, far below the client's 5 s
    finally:
        await heal_recorded(fault, ctx)
