"""The embedded Gym stack (splicing on) against the real tiny policy: protocol, tokens, rewards, env."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import yaml
from openai.types.responses import Response

from pytest_rollout_chaos.collector.environment import GymEnvironment
from pytest_rollout_chaos.collector.gym_client import GymClient, GymRequestError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.rules import first_mismatch
from pytest_rollout_chaos.servers.gym import tasks
from pytest_rollout_chaos.servers.gym.convert import TOKEN_FIELDS
from pytest_rollout_chaos.servers.gym.stack import MODEL_NAME, RESOURCES_NAME, GymStack, events_file
from pytest_rollout_chaos.servers.policy.spec import PolicyServer

from ._helpers import model_calls, run_rows, token_items, with_temperature
from ._nemo_gym_models import BaseVerifyResponse, GymResponse, ServerInstanceDisplayConfig, instances_of
from .conftest import running_stack

pytestmark = pytest.mark.slow  # starts the policy and a Gym stack


@pytest.fixture(scope="module")
def gym(chaos_policy: PolicyServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GymStack]:
    with running_stack(tmp_path_factory.mktemp("gym-spliced"), chaos_policy, splice=True) as stack:
        yield stack


@pytest.fixture(autouse=True)
def _fresh_state(gym: GymStack) -> None:
    gym.reset_state()


@pytest.mark.asyncio
async def test_run_results_parse_as_nemo_gym_verify_responses(gym: GymStack) -> None:
    rows = with_temperature(gym.rows("calculator", 6) + gym.rows("echo", 4), 1.0)
    results = await run_rows(gym, rows)
    assert len(results) == len(rows)
    multi_turn = 0
    for row, result in results:
        BaseVerifyResponse.model_validate(result)
        Response.model_validate(result["response"])
        assert result["_rowidx"] == row["_rowidx"]
        calls = model_calls(result["response"]["output"])
        multi_turn += len(calls) > 1
        for call in calls:  # token fields on the last item of each model call, and only there
            assert all(field in call[-1] for field in TOKEN_FIELDS), call
            assert not any(field in item for item in call[:-1] for field in TOKEN_FIELDS), call
            assert all(isinstance(token, int) for token in call[-1]["generation_token_ids"])
            assert len(call[-1]["generation_token_ids"]) == len(call[-1]["generation_log_probs"])
    assert multi_turn >= 3, "the calculator rows should go through a tool call and a second model call"


@pytest.mark.asyncio
async def test_each_prompt_continues_the_previous_prompt_and_generation_when_splicing(gym: GymStack) -> None:
    results = await run_rows(gym, with_temperature(gym.rows("calculator", 16), 1.0))
    checked = 0
    for row, result in results:
        items = token_items(result["response"]["output"])
        for earlier, later in itertools.pairwise(items):
            prefix = earlier["prompt_token_ids"] + earlier["generation_token_ids"]
            mismatch = first_mismatch(later["prompt_token_ids"], prefix)
            assert mismatch is None, (
                f"row {row['_rowidx']}: prompt differs from the previous call at token {mismatch}"
            )
            checked += 1
    assert checked >= 8, f"only {checked} multi-turn transitions to check"


@pytest.mark.asyncio
async def test_rewards_follow_the_final_answers(gym: GymStack) -> None:
    rows = with_temperature(gym.rows("calculator", 8) + gym.rows("echo", 8), 0.0)
    rewards = []
    for row, result in await run_rows(gym, rows):
        expected = tasks.verify_answer(row, tasks.final_text(result["response"]))
        assert (result["reward"], result["failure_reason"]) == (expected.reward, expected.failure_reason)
        rewards.append(result["reward"])
    assert 1.0 in rewards  # the tiny model repeats its trained words
    row = gym.rows("calculator", 1)[0]
    answer = f"The answer is {row['expected_answer']}."
    async with GymEnvironment(gym.resources_url) as environment:
        right = await environment.verify(row, _response_saying(answer))
        wrong = await environment.verify(row, _response_saying("The answer is 100000."))
    assert (right["reward"], right["failure_reason"]) == (1.0, None)
    assert (wrong["reward"], wrong["failure_reason"]) == (0.0, "wrong_answer")


@pytest.mark.asyncio
async def test_step_batch_is_one_call_per_batch_and_every_call_is_recorded(gym: GymStack) -> None:
    history = History()
    history.follow(events_file(gym.processes[RESOURCES_NAME].log_path.parent, RESOURCES_NAME))
    rows = gym.rows("calculator", 5)
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "%s"}}</tool_call>'
    logs = [[{"role": "assistant", "content": call % row["expression"]}] for row in rows[:3]]
    logs += [
        [{"role": "assistant", "content": f"The answer is {row['expected_answer']}."}] for row in rows[3:]
    ]
    metadata = [{key: row[key] for key in ("task", "expected_answer", "_rowidx")} for row in rows]
    async with GymEnvironment(gym.resources_url) as environment:
        batched = await environment.step(logs, metadata)
        for log, meta in zip(logs[:2], metadata[:2], strict=True):
            await environment.step([log], [meta])
    assert batched.observations[:3] == [
        {"role": "tool", "content": row["expected_answer"]} for row in rows[:3]
    ]
    assert batched.terminateds == [False, False, False, True, True]
    assert batched.rewards == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert batched.next_stop_strings == [None] * 5
    sizes = [event.data["batch_size"] for event in history.events(source="resources", op="step_batch")]
    assert sizes == [5, 1, 1]


@pytest.mark.asyncio
async def test_head_config_parses_and_points_at_the_agents(gym: GymStack) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(gym.head_url + "/global_config_dict_yaml") as reply:
            config = yaml.safe_load(json.loads(await reply.text()))
        async with session.get(gym.head_url + "/server_instances") as reply:
            listed = [ServerInstanceDisplayConfig.model_validate(entry) for entry in await reply.json()]
    instances = instances_of(config)
    assert config["head_server"]["port"] == int(gym.head_url.rsplit(":", 1)[1])
    for agent, url in gym.agents.items():
        server_type, settings = instances[agent]
        assert server_type == "responses_api_agents"
        assert f"http://{settings.host}:{settings.port}" == url
        assert settings.resources_server is not None
        assert settings.resources_server.name in instances
        assert settings.model_server is not None
        assert settings.model_server.name in instances
    assert instances[MODEL_NAME][0] == "responses_api_models"
    assert {entry.name for entry in listed} == set(instances)


@pytest.mark.asyncio
async def test_model_server_output_and_incomplete_answers(gym: GymStack) -> None:
    row = gym.rows("calculator", 1)[0]
    params = dict(row["responses_create_params"], temperature=0.0)
    async with aiohttp.ClientSession() as session:
        full = await _responses(session, gym, params)
        short = await _responses(session, gym, {**params, "max_output_tokens": 2})
        too_long = await _responses(session, gym, {**params, "max_output_tokens": 10**7})
    for body in (full, short, too_long):
        GymResponse.model_validate(body)
        Response.model_validate(body)
    assert full["incomplete_details"] is None
    assert all(field in full["output"][-1] for field in TOKEN_FIELDS)
    assert short["incomplete_details"] == {"reason": "max_output_tokens"}
    assert len(short["output"][-1]["generation_token_ids"]) == 2
    # A policy 400 about the context length: an empty message without token ids, as NeMo Gym does.
    assert too_long["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [item["type"] for item in too_long["output"]] == ["message"]
    assert not any(field in too_long["output"][0] for field in TOKEN_FIELDS)


@pytest.mark.asyncio
async def test_a_failing_inner_server_is_named_all_the_way_out(gym: GymStack) -> None:
    row = gym.rows("calculator", 1)[0]
    row["responses_create_params"]["input"] = [{"type": "image", "url": "x"}]
    history = History()
    async with GymClient(gym.head_url, history=history) as client:
        (awaitable,) = client.run_examples([row])
        with pytest.raises(GymRequestError) as caught:
            await awaitable
    error = caught.value
    assert (error.server, error.status) == ("calculator_agent", 500)
    assert "Hit an exception in calculator_agent calling an inner server: model at" in error.reason
    assert "has type 'image'" in error.reason
    assert [event.kind for event in history.events(source="collector")] == ["invoke", "fail"]


async def _responses(session: aiohttp.ClientSession, gym: GymStack, params: dict[str, Any]) -> dict[str, Any]:
    async with session.post(gym.model_url + "/v1/responses", json=params) as reply:
        assert reply.status == 200, await reply.text()
        body: dict[str, Any] = await reply.json()
        return body


def _response_saying(text: str) -> dict[str, Any]:
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return {"output": [message]}
