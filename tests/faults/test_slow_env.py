"""slow_env against a real hook server: /step_batch waits per call plus per item."""

from __future__ import annotations

import time

import pytest

from pytest_rollout_chaos.faults.slow_env import SlowEnv
from tests.faults._applied import applied
from tests.faults._hooked import Hooked, hook_hits


async def _timed(hooked: Hooked, path: str, body: object) -> float:
    started = time.monotonic()
    status, _ = await hooked.post(path, body)
    assert status == 200
    return time.monotonic() - started


@pytest.mark.asyncio
async def test_delay_grows_with_the_batch_size(hooked: Hooked) -> None:
    ctx, history = hooked.context()
    async with applied(SlowEnv(target="hooked", delay_ms=100, per_item_ms=50), ctx):
        one = await _timed(hooked, "/step_batch", {"items": ["a"]})
        six = await _timed(hooked, "/step_batch", {"items": list("abcdef")})
        elsewhere = await _timed(hooked, "/run", {})
    assert one == pytest.approx(0.15, rel=0.2, abs=0.03)
    assert six == pytest.approx(0.40, rel=0.2, abs=0.03)
    assert elsewhere < 0.1, "only the environment's /step_batch is slowed"
    assert [hit["items"] for hit in hook_hits(history, "delay")] == [1, 6]
