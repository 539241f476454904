"""The ``chaos_gym`` session fixture: a whole stack, two agents, per-test reset."""

from __future__ import annotations

import json
import urllib.request

import pytest

from pytest_rollout_chaos.servers.gym.stack import RESOURCES_NAME, GymStack

from ._helpers import run_rows, with_temperature

pytestmark = pytest.mark.slow  # starts the policy and the Gym stack


@pytest.mark.asyncio
async def test_chaos_gym_serves_both_agents_and_resets_state(chaos_gym_reset: GymStack) -> None:
    gym = chaos_gym_reset
    assert set(gym.agents) == {"calculator_agent", "echo_agent"}
    assert all(process.is_running() for process in gym.processes.values())
    rows = with_temperature(gym.rows("calculator", 2) + gym.rows("echo", 2), 0.0)
    results = await run_rows(gym, rows)
    assert (
        sorted(row["agent_ref"]["name"] for row, _ in results)
        == ["calculator_agent"] * 2 + ["echo_agent"] * 2
    )
    # requests are recorded by the fault layer; the servers write what only they know
    written = {path.name.removesuffix(".events.jsonl") for path in gym.events_files if path.exists()}
    assert {"calculator_agent", "echo_agent", "gym_model"} <= written
    gym.set_env_latency(per_call_ms=5.0, per_item_ms=1.0)
    assert _state(gym)["latency"] == {"per_call_ms": 5.0, "per_item_ms": 1.0}
    assert _state(gym)["sessions"] == 4
    gym.reset_state()
    assert _state(gym) == {
        "sessions": 0,
        "step_batch_calls": 0,
        "latency": {"per_call_ms": 0.0, "per_item_ms": 0.0},
    }


def test_rows_are_numbered_and_checked(chaos_gym: GymStack) -> None:
    rows = chaos_gym.rows("echo", 40)  # more than the dataset holds: it cycles
    assert [row["_rowidx"] for row in rows] == list(range(40))
    assert rows[36]["word"] == rows[0]["word"]
    with pytest.raises(ValueError, match="unknown task 'chess'; known tasks: calculator, echo"):
        chaos_gym.rows("chess", 1)


def _state(gym: GymStack) -> dict[str, object]:
    with urllib.request.urlopen(gym.processes[RESOURCES_NAME].url + "/_gym/state", timeout=5) as reply:
        state: dict[str, object] = json.loads(reply.read())
        return state
