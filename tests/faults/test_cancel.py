"""cancel against a running task: the collection is cancelled from outside, once, and says so."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.apply import inject_recorded
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.faults.cancel import Cancel
from pytest_rollout_chaos.history import History
from tests.faults._applied import applied


@pytest.mark.asyncio
async def test_the_attached_collection_is_cancelled_and_the_inject_records_it() -> None:
    history = History()
    ctx = FaultContext(history=history)
    collection = asyncio.create_task(asyncio.sleep(30))
    ctx.collection.attach(collection)
    async with applied(Cancel(target="collector"), ctx) as facts:
        with pytest.raises(asyncio.CancelledError):
            await collection
    assert facts == {"cancelled": True}
    [inject] = history.events(source="fault", op="inject")
    assert inject.data["fault"] == "cancel"
    assert inject.data["cancelled"] is True


@pytest.mark.asyncio
async def test_a_collection_already_over_is_not_cancelled() -> None:
    ctx = FaultContext(history=History())
    collection = asyncio.create_task(asyncio.sleep(0))
    await collection
    ctx.collection.attach(collection)
    assert await Cancel(target="collector").inject(ctx) == {"cancelled": False}


@pytest.mark.asyncio
async def test_a_context_without_a_collection_is_refused_and_recorded() -> None:
    history = History()
    with pytest.raises(FaultError, match="no collection is attached"):
        await inject_recorded(Cancel(target="collector"), FaultContext(history=history))
    (event,) = history.events(source="fault")
    assert "no collection is attached" in event.data["error"]
