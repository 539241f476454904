"""The resources server app over real HTTP on loopback (in-process, no child process)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from pytest_rollout_chaos.collector.environment import GymEnvironment
from pytest_rollout_chaos.collector.gym_client import GymRequestError
from pytest_rollout_chaos.history import EVENTS_FILE_ENV, History, text_fingerprint
from pytest_rollout_chaos.servers.gym import resources, tasks

Client = TestClient[web.Request, web.Application]
CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "3 + 4"}}</tool_call>'


@pytest.fixture
def events_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "resources.events.jsonl"
    monkeypatch.setenv(EVENTS_FILE_ENV, str(path))
    return path


@pytest_asyncio.fixture
async def client(events_file: Path) -> AsyncIterator[Client]:
    async with TestClient(TestServer(resources.build_app(step_latency_ms=0.0))) as test_client:
        yield test_client


def _sample(a: int, op: str, b: int, reply: str) -> tuple[list[dict[str, str]], dict[str, object]]:
    row = tasks.calculator_row(a, op, b)
    log = [{"role": "user", "content": f"What is {a} {op} {b}?"}, {"role": "assistant", "content": reply}]
    return log, {key: row[key] for key in ("task", "expected_answer", "expression", "_rowidx")}


@pytest.mark.asyncio
async def test_seed_session_sets_a_cookie_and_tools_count_calls(client: Client) -> None:
    seeded = await client.post("/seed_session", json={"_rowidx": 4})
    assert seeded.status == 200
    session = seeded.cookies[resources.SESSION_COOKIE].value
    tool = await client.post(
        "/calculator", json={"expression": "6 * 7"}, headers={"Cookie": f"session={session}"}
    )
    assert (tool.status, await tool.text()) == (200, "42")
    state = await (await client.get("/_gym/state")).json()
    assert state["sessions"] == 1


@pytest.mark.asyncio
async def test_bad_tool_input_is_a_400_with_a_json_string_body(client: Client) -> None:
    reply = await client.post("/calculator", json={"expression": "6 / 7"})
    assert reply.status == 400
    assert "one of + - *" in json.loads(await reply.text())


@pytest.mark.asyncio
async def test_verify_rewards_right_and_wrong_answers(client: Client) -> None:
    row = tasks.calculator_row(3, "+", 4)
    for text, reward, reason in (("The answer is 7.", 1.0, None), ("The answer is 9.", 0.0, "wrong_answer")):
        response = {
            "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
            ]
        }
        body = await (await client.post("/verify", json={**row, "response": response})).json()
        assert (body["reward"], body["failure_reason"]) == (reward, reason)
        assert body["expected_answer"] == "7"
        assert body["response"] == response


@pytest.mark.asyncio
async def test_step_batch_is_one_call_for_the_batch_and_is_recorded(
    client: Client, events_file: Path
) -> None:
    samples = [
        _sample(3, "+", 4, CALL),
        _sample(2, "*", 5, "The answer is 10."),
        _sample(1, "-", 1, "The answer is 5."),
    ]
    environment = GymEnvironment(str(client.make_url("")))
    async with environment:
        result = await environment.step([log for log, _ in samples], [meta for _, meta in samples])
    assert result.observations[0] == {"role": "tool", "content": "7"}
    assert result.terminateds == [False, True, True]
    assert result.rewards == [0.0, 1.0, 0.0]
    assert result.answers == [None, "The answer is 10.", "The answer is 5."]
    history = History(t0=0.0)
    history.follow(events_file, from_now=False)
    [batch] = [event.data for event in history.events(op="step_batch")]
    assert (batch["batch_size"], batch["tasks"], batch["turns"]) == (3, ["calculator"] * 3, [1, 1, 1])
    # each item's row and the text of its last model turn; each answer's observation and end
    assert batch["rows"] == [0, 0, 0]
    assert batch["answers"] == [text_fingerprint(log[-1]["content"]) for log, _ in samples]
    [answered] = [event.data for event in history.events(op="step_batch_rewards")]
    assert answered["observations"][0] == text_fingerprint("7")
    assert answered["terminateds"] == [False, True, True]


@pytest.mark.asyncio
async def test_step_batch_costs_per_call_and_per_item(client: Client) -> None:
    await client.post("/_gym/latency", json={"per_call_ms": 100, "per_item_ms": 50})
    log, meta = _sample(3, "+", 4, "The answer is 7.")
    started = time.monotonic()
    reply = await client.post("/step_batch", json={"message_logs": [log] * 4, "metadata": [meta] * 4})
    elapsed_s = time.monotonic() - started
    assert reply.status == 200
    assert 0.3 <= elapsed_s < 1.5
    await client.post("/_gym/reset")
    state = await (await client.get("/_gym/state")).json()
    assert state["latency"] == {"per_call_ms": 0.0, "per_item_ms": 0.0}
    assert state["step_batch_calls"] == 0


@pytest.mark.asyncio
async def test_step_batch_rejects_mismatched_lengths_with_the_counts(
    client: Client,
) -> None:
    reply = await client.post("/step_batch", json={"message_logs": [[]], "metadata": []})
    assert reply.status == 400
    assert "1 items but metadata has 0" in await reply.text()
    environment = GymEnvironment(str(client.make_url("")))
    async with environment:
        with pytest.raises(GymRequestError, match=r"resources .* HTTP 400"):
            await environment.step([[{"role": "assistant", "content": "x"}]], [{"task": "chess"}])


@pytest.mark.asyncio
async def test_a_rescore_bonus_scores_each_row_higher_each_time_until_the_reset(
    client: Client, events_file: Path
) -> None:
    response = {
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "The answer is 7."}],
            }
        ]
    }
    row = {**tasks.calculator_row(3, "+", 4, row_index=1), "response": response}

    async def verified() -> float:
        return float((await (await client.post("/verify", json=row)).json())["reward"])

    assert [await verified(), await verified()] == [1.0, 1.0]  # no bonus: every attempt alike
    assert (await client.post("/_gym/rescore", json={"bonus": "x"})).status == 400
    assert (await client.post("/_gym/rescore", json={"bonus": 0.25})).status == 200
    assert [await verified(), await verified()] == [1.0, 1.25]
    other = _sample(2, "*", 5, "The answer is 10.")
    environment = GymEnvironment(str(client.make_url("")))
    async with environment:
        first = await environment.step([other[0]], [{**other[1], "_rowidx": 1}])
        second = await environment.step([other[0]], [{**other[1], "_rowidx": 2}])
    assert (first.rewards, second.rewards) == ([1.5], [1.0])  # row 1's third scoring, row 2's first
    history = History(t0=0.0)
    history.follow(events_file, from_now=False)
    answered = [event.data for event in history.events(op="step_batch_rewards")]
    assert [(data["rows"], data["rewards"]) for data in answered] == [([1], [1.5]), ([2], [1.0])]
    await client.post("/_gym/reset", json={})
    assert await verified() == 1.0


@pytest.mark.asyncio
async def test_a_reward_spread_scores_a_groups_members_apart_until_the_reset(client: Client) -> None:
    """Rows ``_rowidx mod 4`` apart score ``spread`` apart: a GRPO group's members differ."""
    response = {
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "no"}]}
        ]
    }

    async def verified(index: int) -> float:
        row = {**tasks.calculator_row(3, "+", 4, row_index=index), "response": response}
        return float((await (await client.post("/verify", json=row)).json())["reward"])

    assert [await verified(i) for i in range(4)] == [0.0, 0.0, 0.0, 0.0]
    assert (await client.post("/_gym/spread", json={"spread": -1})).status == 400
    assert (await client.post("/_gym/spread", json={"spread": 0.25})).status == 200
    assert [await verified(i) for i in range(4, 9)] == [0.0, 0.25, 0.5, 0.75, 0.0]
    await client.post("/_gym/reset", json={})
    assert await verified(5) == 0.0
