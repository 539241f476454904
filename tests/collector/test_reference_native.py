"""The reference collector's native style against a small loopback policy and a recording environment.

The policy is a real aiohttp server on 127.0.0.1 with a toy chat template whose rendering of
an assistant turn is exactly the tokens generated for it, so turns are prefix-consistent.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import pytest
import pytest_asyncio
from aiohttp import web

from pytest_rollout_chaos.collector.protocol import CollectorContext, CollectorSettings, InfrastructureError
from pytest_rollout_chaos.collector.reference import ReferenceCollector
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants import Status, check_all
from pytest_rollout_chaos.invariants.observe import observe
from tests.collector._fake_gym import FakeGym

pytestmark = pytest.mark.asyncio

EOS = 2
ROLE_TOKEN = {"user": 101, "tool": 102, "assistant": 200}


def render(messages: list[dict[str, Any]]) -> list[int]:
    ids: list[int] = []
    for message in messages:
        ids += [ROLE_TOKEN[message["role"]], *(10 + ord(c) % 50 for c in message["content"]), EOS]
    return [*ids, ROLE_TOKEN["assistant"]]


class Policy:
    """Answers ``CALL`` first, then ``DONE``; rows whose text contains ``nan`` get NaN logprobs once."""

    def __init__(self) -> None:
        self.nan_sent: set[str] = set()

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        messages = body["messages"]
        text = "DONE" if any(m["role"] == "tool" for m in messages) else "CALL"
        generated = [*(10 + ord(c) % 50 for c in text), EOS]
        logprob = -0.5
        question = messages[0]["content"]
        if "nan" in question and question not in self.nan_sent:
            self.nan_sent.add(question)
            logprob = math.nan
        content = [{"token": f"token_id:{t}", "logprob": logprob} for t in generated]
        choice = {"message": {"role": "assistant", "content": text}, "logprobs": {"content": content}}
        choice |= {"finish_reason": "stop", "token_ids": generated}
        return web.json_response({"choices": [choice], "prompt_token_ids": render(messages)})


class StepReturn(NamedTuple):
    observations: list[dict[str, str]]
    rewards: list[float]
    terminateds: list[bool]


class RecordingEnv:
    """Steps like the resources server and records each call as it does (``batched_env_eval`` reads it)."""

    def __init__(self, history: History) -> None:
        self.batch_sizes: list[int] = []
        self.history = history

    async def step(self, message_logs: list[list[dict[str, Any]]], metadata: list[Any]) -> StepReturn:
        self.batch_sizes.append(len(message_logs))
        tasks = [str(item.get("task")) for item in metadata]
        turns = [sum(1 for m in log if m["role"] == "assistant") for log in message_logs]
        self.history.append(
            "resources", "info", "step_batch", {"batch_size": len(tasks), "tasks": tasks, "turns": turns}
        )
        done = [log[-1]["content"] == "DONE" for log in message_logs]
        return StepReturn(
            [{"role": "tool", "content": "4"} for _ in done], [1.0 if d else 0.0 for d in done], done
        )

    async def verify(self, row: Any, response: Any) -> dict[str, Any]:
        return {}


@pytest_asyncio.fixture
async def policy_url() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", Policy().chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


def _rows(*questions: str, task: str = "calculator") -> list[dict[str, Any]]:
    return [
        {"responses_create_params": {"input": [{"role": "user", "content": q}]}, "task": task, "_rowidx": i}
        for i, q in enumerate(questions)
    ]


def _context(policy: str, *, policy_ready_timeout_s: float = 60.0) -> CollectorContext:
    history = History()
    return CollectorContext(
        gym=FakeGym(),
        policy=policy,
        env=RecordingEnv(history),
        tokenizer=None,
        settings=CollectorSettings(
            style="native", request_timeout_s=5.0, policy_ready_timeout_s=policy_ready_timeout_s
        ),
        history=history,
        eos_token_ids=(EOS,),
    )


def _env(ctx: CollectorContext) -> RecordingEnv:
    assert isinstance(ctx.env, RecordingEnv)
    return ctx.env


async def test_one_batched_step_per_task_group_per_turn(policy_url: str) -> None:
    ctx = _context(policy_url)
    env = _env(ctx)
    rows = _rows("1+1", "2+2", "3+3")
    rows[2]["task"] = "echo"
    observation = await observe(
        ReferenceCollector(ctx), rows, mode="validation", history=ctx.history, deadline_s=10
    )
    assert observation.rollouts is not None, observation.raised
    assert [r.status for r in observation.rollouts if r] == ["completed"] * 3
    assert [len(r.turns) for r in observation.rollouts if r] == [2, 2, 2]
    assert [r.reward for r in observation.rollouts if r] == [1.0, 1.0, 1.0]
    assert sorted(env.batch_sizes) == [1, 1, 2, 2]  # 2 turns x (calculator: 2 samples, echo: 1)
    verdicts = check_all(
        observation, ["batched_env_eval", "accounted", "finite_logprobs", "prefix_consistent"]
    )
    assert [v.status for v in verdicts] == [Status.PASS] * 4, [v.render() for v in verdicts]


async def test_nan_logprobs_are_regenerated_for_that_sample(policy_url: str) -> None:
    ctx = _context(policy_url)
    rollouts = await ReferenceCollector(ctx).collect(_rows("nan please", "2+2"), mode="train")
    assert [r.status for r in rollouts] == ["completed", "completed"]
    assert rollouts[0].attempts == 2
    assert len(ctx.history.events(source="collector", op="retry")) == 1


async def test_an_unreachable_policy_fails_at_its_ready_deadline() -> None:
    ctx = _context("http://127.0.0.1:9/v1", policy_ready_timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(InfrastructureError, match=r"was not ready within policy_ready_timeout_s=0.5s"):
        await ReferenceCollector(ctx).collect(_rows("1+1"), mode="train")
    assert time.monotonic() - started < 5.0


async def test_the_per_sample_known_bug_is_caught_here_too(policy_url: str) -> None:
    from fixtures.collectors import per_sample_env

    ctx = _context(policy_url)
    env = _env(ctx)
    collector = per_sample_env.factory(ctx)
    observation = await observe(
        collector, _rows("1+1", "2+2"), mode="validation", history=ctx.history, deadline_s=10
    )
    assert env.batch_sizes == [1, 1, 1, 1]
    [verdict] = check_all(observation, ["batched_env_eval"])
    assert verdict.status is Status.FAIL, verdict.render()
    assert (
        "per-sample env evaluation in validation: the environment served 4 env.step calls where 2 batched"
        in verdict.summary
    )


async def test_the_mixed_groups_known_bug_is_caught_from_what_the_environment_served(policy_url: str) -> None:
    from fixtures.collectors import mixed_env_batch

    ctx = _context(policy_url)
    rows = _rows("1+1", "2+2", "3+3")
    rows[2]["task"] = "echo"
    observation = await observe(
        mixed_env_batch.factory(ctx), rows, mode="validation", history=ctx.history, deadline_s=10
    )
    assert _env(ctx).batch_sizes == [3, 3]  # one call per turn, both groups in it
    steps = ctx.history.events(source="collector", op="env_step")
    assert len(steps) == 2, "by its own record, one batched call per turn"
    [verdict] = check_all(observation, ["batched_env_eval"])
    assert verdict.status is Status.FAIL, verdict.render()
    assert "2 env.step calls mixed task groups" in verdict.summary
