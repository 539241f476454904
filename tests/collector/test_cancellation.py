"""A collection cancelled from outside, against the fake Gym: the reference lets the CancelledError
through at once and starts nothing more; a collector that retries on ``BaseException`` does not."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from fixtures.collectors import swallows_cancel
from pytest_rollout_chaos.collector.protocol import CollectorFactory
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.faults.apply import inject_recorded
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.faults.cancel import Cancel
from pytest_rollout_chaos.invariants import Observation, Status, check_all
from tests.collector._fake_gym import FakeGym, context, rows

pytestmark = pytest.mark.asyncio


async def _cancelled_mid_run(factory: CollectorFactory) -> Observation:
    ctx = context(FakeGym(delay_s=0.3))
    faults = FaultContext(history=ctx.history)
    batch = rows(4)
    started = time.monotonic()
    collection = asyncio.create_task(factory(ctx).collect(batch, mode="train"))
    faults.collection.attach(collection)
    await asyncio.sleep(0.1)  # every row's /run under way
    await inject_recorded(Cancel(target="collector"), faults)
    raised: BaseException | None = None
    try:
        await asyncio.wait_for(asyncio.shield(collection), timeout=10)
    except asyncio.CancelledError as error:
        raised = error
    elapsed_s = time.monotonic() - started
    return Observation(
        rows=batch,
        rollouts=None if raised is not None else collection.result(),
        raised=raised,
        history=ctx.history,
        deadline_s=10,
        elapsed_s=elapsed_s,
        started_at=started,
        request_timeout_s=ctx.settings.request_timeout_s,
    )


async def test_the_reference_ends_with_cancelled_error_at_once_and_sends_nothing_more() -> None:
    observation = await _cancelled_mid_run(ReferenceCollector)
    assert isinstance(observation.raised, asyncio.CancelledError)
    verdicts = check_all(observation, ["cancel_honoured", "root_cause_visible", "accounted"])
    assert [v.status for v in verdicts] == [Status.PASS] * 3, [v.render() for v in verdicts]


async def test_retrying_on_base_exception_keeps_sending_after_the_cancel() -> None:
    observation = await _cancelled_mid_run(swallows_cancel.factory)
    [verdict] = check_all(observation, ["cancel_honoured"])
    assert verdict.status is Status.FAIL, verdict.render()
    assert "it sent 4 requests after the cancel (rows [0, 1, 2, 3])" in verdict.summary


class _CancelledAsRowZeroAnswers(FakeGym):
    """Row 0's answer comes with the collection's cancellation queued right behind it: it lands after
    row 0 gave its permit back and before the row woken by that permit runs, as the ``cancel``
    fault's poll can land."""

    collection: asyncio.Task[object] | None = None

    async def _run(self, row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        answered = await super()._run(row)
        if row["_rowidx"] == 0 and self.collection is not None:
            asyncio.get_running_loop().call_soon(self.collection.cancel)
        return answered


async def test_a_row_whose_permit_frees_as_the_collection_is_cancelled_never_starts() -> None:
    gym = _CancelledAsRowZeroAnswers()
    ctx = context(gym, max_concurrency=1)
    collection = gym.collection = asyncio.create_task(ReferenceCollector(ctx).collect(rows(3), mode="train"))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(collection), timeout=10)
    assert gym.calls == {0: 1}, f"rows started after the cancellation: {sorted(set(gym.calls) - {0})}"
