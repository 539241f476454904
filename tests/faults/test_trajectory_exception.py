"""trajectory_exception against a real hook server: one row's /run raises, its siblings do not."""

from __future__ import annotations

import json

import pytest

from pytest_rollout_chaos.faults.trajectory_exception import TrajectoryException
from tests.faults._applied import applied
from tests.faults._hooked import Hooked


@pytest.mark.asyncio
async def test_the_chosen_row_fails_with_a_json_string_500(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    async with applied(TrajectoryException(target="hooked", row=2, message="tool crashed"), ctx) as facts:
        answers = {row: await hooked.post("/run", {"_rowidx": row}) for row in range(4)}
    assert facts["match"] == {"route": "/run", "row": 2}, "the default route is the agent's /run"
    assert {row: status for row, (status, _) in answers.items()} == {0: 200, 1: 200, 2: 500, 3: 200}
    assert json.loads(answers[2][1]) == "RuntimeError('tool crashed')"
