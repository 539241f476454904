"""short_results against the real Gym client and a real /run server: fewer results than rows."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.collector.gym_client import GymClient
from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.apply import inject_recorded
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.faults.short_results import ShortResults
from pytest_rollout_chaos.history import History
from tests.faults._applied import applied
from tests.faults._hooked import Hooked


def _rows(count: int) -> list[dict[str, object]]:
    return [{"_rowidx": index, "agent_ref": {"name": "agent"}} for index in range(count)]


async def _collect(client: GymClient, count: int) -> list[int]:
    return sorted(
        [int(row["_rowidx"]) for row, _ in [await item for item in client.run_examples(_rows(count))]]
    )


@pytest.mark.asyncio
async def test_the_client_yields_count_fewer_results(hooked: Hooked) -> None:
    client = GymClient("http://127.0.0.1:9", agent_urls={"agent": hooked.url}, timeout_s=5.0)
    ctx, history = hooked.context(gym_client=client)
    try:
        async with applied(ShortResults(target="gym", count=2), ctx) as facts:
            short = await _collect(client, 5)
        full = await _collect(client, 5)
    finally:
        await client.close()
    assert len(short) == 3
    assert full == [0, 1, 2, 3, 4]
    assert facts == {"dropped": 2}
    assert history.events(source="fault", op="inject")[0].data["count"] == 2


@pytest.mark.asyncio
async def test_a_context_without_a_gym_client_is_refused_and_recorded() -> None:
    history = History()
    ctx = FaultContext(history=history)
    with pytest.raises(FaultError, match="has no short_results"):
        await inject_recorded(ShortResults(target="gym"), ctx)
    (event,) = history.events(source="fault")
    assert "has no short_results" in event.data["error"]
