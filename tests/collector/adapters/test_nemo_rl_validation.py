"""The ``nemo_rl`` adapter in validation mode: NeMo RL's own ``validate()`` decides the verdict.

The gate on PR #2209 (``tests/collector/adapters/test_gates.py``, pair ``nemo_rl#2209``) shows
that on the tree before the PR ``validation-batched-env`` fails by ``batched_env_eval`` alone
(``validate()`` steps the environment once per sample per turn), that it passes on the PR's head,
and that no other validation-mode scenario changes verdict. Here: an adapter broken on purpose
(``_nemo_rl_val_broken``: it runs NeMo RL's batched loop itself instead of ``validate()``) makes
the pre-fix tree look fixed, so the gate guards the adapter's fidelity too. The fast tests pin
the pieces that need no trainer: the mapping, the observation of rollout functions, the Ray
seam, the policy generation and the environment handles.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from types import ModuleType, SimpleNamespace
from typing import Any, NamedTuple, cast

import pytest
import pytest_asyncio
import torch
from aiohttp import web

from pytest_rollout_chaos.collector.abilities import declared
from pytest_rollout_chaos.collector.adapters import nemo_rl_validation as validation
from pytest_rollout_chaos.collector.adapters.nemo_rl import NemoRLCollector
from pytest_rollout_chaos.collector.adapters.nemo_rl_interfaces import (
    EnvHandle,
    EnvRef,
    HttpGeneration,
    Stop,
    ray_get_resolves,
)
from pytest_rollout_chaos.collector.protocol import CollectionError, CollectorContext, CollectorSettings, Turn
from pytest_rollout_chaos.engine.fit import unsupported
from pytest_rollout_chaos.history import History
from tests.catalog._verdicts import CATALOG, run_catalog
from tests.collector.adapters._nemo_rl_val_trees import BASE, nemo_rl_tree

SCENARIO = "validation-batched-env"
BROKEN = "tests.collector.adapters._nemo_rl_val_broken:self_batching"


@pytest.mark.slow
def test_an_adapter_that_batches_the_environment_itself_makes_the_pre_fix_tree_look_fixed(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The real adapter fails this scenario on this tree (the PR #2209 gate's base side)."""
    tree = nemo_rl_tree(BASE, tmp_path_factory.mktemp("nemo-rl-broken"))
    verdicts = run_catalog(
        tmp_path_factory.mktemp("broken"),
        target=BROKEN,
        scenarios=[SCENARIO],
        stack_args=[f"--rollout-chaos-upstream={tree}"],
    )
    assert verdicts[SCENARIO].passed, verdicts[SCENARIO].message


@pytest.mark.slow
def test_validates_default_path_batches_the_environment_so_the_scenario_names_the_async_engine(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Without ``vllm_cfg.async_engine`` (off by default) ``validate()`` takes ``run_multi_turn_rollout``,
    which steps the environment once per task group per turn even before PR #2209: the bug is on
    the async-engine path only, which is why the scenario asks for it in ``trainer_config``."""
    scratch = tmp_path_factory.mktemp("sync-validation")
    text = (CATALOG / f"{SCENARIO}.chaos.yaml").read_text(encoding="utf-8")
    asked = "  trainer_config:\n    nemo_rl.policy.generation.vllm_cfg.async_engine: true\n"
    assert asked in text
    copy = scratch / "sync.chaos.yaml"
    copy.write_text(text.replace(asked, "").replace(f"name: {SCENARIO}", "name: sync-validation"), "utf-8")
    tree = nemo_rl_tree(BASE, tmp_path_factory.mktemp("nemo-rl-sync"))
    verdicts = run_catalog(
        scratch, target="nemo_rl", scenarios=[], stack_args=[f"--rollout-chaos-upstream={tree}", str(copy)]
    )
    assert verdicts["sync-validation"].passed, verdicts["sync-validation"].message


# -- the pieces, without a trainer -----------------------------------------------------------------


def context(policy: str = "http://127.0.0.1:1/v1", **settings: Any) -> CollectorContext:
    return CollectorContext(
        gym=cast(Any, None),
        policy=policy,
        env=None,
        tokenizer=None,
        settings=CollectorSettings(**settings),
        history=History(),
        model="tiny",
    )


def message(role: str, ids: list[int], logprobs: list[float] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"role": role, "content": "", "token_ids": torch.tensor(ids)}
    if logprobs is not None:
        found["generation_logprobs"] = torch.tensor(logprobs)
    return found


def test_a_turn_is_an_assistant_message_and_every_token_before_it() -> None:
    log = [
        message("user", [1, 2, 3]),
        message("assistant", [4, 5], [-0.5, -0.25]),
        message("tool", [6]),
        message("assistant", [7], [-1.0]),
        message("environment", [8]),
    ]
    assert validation.turns_from_message_log(log) == [
        Turn([1, 2, 3], [4, 5], [-0.5, -0.25]),
        Turn([1, 2, 3, 4, 5, 6], [7], [-1.0]),
    ]


def test_the_batch_maps_to_one_rollout_per_entry_and_a_missing_entry_stays_missing() -> None:
    rows = [{"_rowidx": 7}, {"_rowidx": 3}, {"_rowidx": 5}]
    batch = {
        "message_log": [[message("user", [1]), message("assistant", [2], [-0.5])], [message("user", [1])]],
        "total_reward": torch.tensor([1.0, 0.0]),
        "truncated": torch.tensor([False, True]),
    }
    rollouts = validation.rollouts_from_batch(batch, rows)
    assert [(r.row_index, r.status, r.reward, len(r.turns)) for r in rollouts] == [
        (7, "completed", 1.0, 1),
        (3, "truncated", 0.0, 0),  # a sample whose generation failed keeps no turn; nothing is repaired
    ]


def test_the_batch_is_read_from_either_result_shape() -> None:
    batch = {"message_log": [], "total_reward": torch.tensor([])}
    assert validation.final_batch((batch, {"metric": 1})) is batch
    assert validation.final_batch(SimpleNamespace(final_batch=batch)) is batch
    assert validation.final_batch(({"rewards": 1}, {})) is None
    assert validation.final_batch(True) is None


def test_every_rollout_function_grpo_imported_is_observed_and_restored() -> None:
    grpo = ModuleType("nemo_rl.algorithms.grpo")

    def rollout(batch: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"message_log": [batch]}, {}

    def own() -> None:
        return None

    rollout.__module__ = "nemo_rl.experience.rollouts"
    own.__module__ = "nemo_rl.algorithms.grpo"
    grpo.rollout = rollout  # type: ignore[attr-defined]
    grpo.own = own  # type: ignore[attr-defined]
    ctx = context()
    calls: list[tuple[str, Any]] = []
    with validation.observing_rollouts(grpo, ctx, calls):
        assert grpo.own is own
        grpo.rollout("b")
    assert grpo.rollout is rollout
    assert calls == [(f"nemo_rl.experience.rollouts.{rollout.__qualname__}", ({"message_log": ["b"]}, {}))]
    [event] = ctx.history.events(op="upstream")
    assert event.data["call"].endswith("rollout")
    assert event.data["by"] == validation.VALIDATE


def test_ray_get_waits_for_environment_calls_and_leaves_the_rest_to_ray() -> None:
    import concurrent.futures

    seen: list[Any] = []

    def real_get(refs: Any, timeout: float | None = None) -> str:
        seen.append(refs)
        return "real"

    ray = SimpleNamespace(get=real_get)
    real = ray.get
    ready: concurrent.futures.Future[Any] = concurrent.futures.Future()
    ready.set_result("stepped")
    stop = Stop()
    with ray_get_resolves(ray):
        assert ray.get(EnvRef(ready, stop)) == "stepped"
        assert ray.get([EnvRef(ready, stop), EnvRef(ready, stop)]) == ["stepped", "stepped"]
        assert ray.get(["object-ref"]) == "real"
    assert ray.get is real
    assert seen == [["object-ref"]]


def test_a_wait_for_an_environment_call_ends_when_the_collection_is_cancelled() -> None:
    import concurrent.futures

    stop = Stop()
    never: concurrent.futures.Future[Any] = concurrent.futures.Future()
    threading.Timer(0.1, stop.now).start()
    with pytest.raises(CollectionError, match="cancelled"):
        EnvRef(never, stop).result()


class StepReturn(NamedTuple):
    observations: list[dict[str, str]]
    metadata: list[Any]
    next_stop_strings: list[Any]
    rewards: list[float]
    terminateds: list[bool]
    answers: list[Any] | None


class SlowEnv:
    """Records batch sizes and how many steps overlap."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.running = 0
        self.overlap = 0

    async def step(self, message_logs: list[Any], metadata: list[Any]) -> StepReturn:
        self.running += 1
        self.overlap = max(self.overlap, self.running)
        await asyncio.sleep(0.02)
        self.running -= 1
        self.sizes.append(len(message_logs))
        n = len(message_logs)
        return StepReturn(
            [{"role": "tool", "content": "4"}] * n, metadata, [None] * n, [0.5] * n, [True] * n, None
        )

    async def verify(self, row: Any, response: Any) -> dict[str, Any]:
        return {}


@pytest.mark.asyncio
async def test_an_environment_handle_steps_ctx_env_one_call_at_a_time_and_records_each_call() -> None:
    ctx, env = context(), SlowEnv()
    handle = EnvHandle(
        "calculator",
        ctx=ctx,
        env=env,
        loop=asyncio.get_running_loop(),
        stop=Stop(),
        environment_return=StepReturn,
    )
    second_turn = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}] * 2

    def from_nemo_rl() -> list[Any]:  # NeMo RL submits from its own thread, then blocks in ray.get
        refs = [handle.step.remote([second_turn], [{}]), handle.step.remote([second_turn] * 2, [{}, {}])]
        return [ref.result() for ref in refs]

    _, second = await asyncio.to_thread(from_nemo_rl)
    assert env.sizes == [1, 2]
    assert env.overlap == 1
    assert torch.equal(second.rewards, torch.tensor([0.5, 0.5]))
    assert second.terminateds.dtype == torch.bool
    steps = [event.data for event in ctx.history.events(op="env_step")]
    assert steps == [
        {"task": "calculator", "batch_size": 1, "turn": 1},
        {"task": "calculator", "batch_size": 2, "turn": 1},
    ]


def test_a_gym_style_validation_scenario_is_turned_away_before_it_runs_saying_why() -> None:
    why = unsupported(declared(NemoRLCollector), style="gym", mode="validation", group_size=1)
    assert "run_async_nemo_gym_rollout" in str(why)
    assert unsupported(declared(NemoRLCollector), style="native", mode="validation", group_size=1) is None


class Completions:
    """A ``/v1/completions`` that answers each prompt with its last id + 1, then EOS (3)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        ids = [body["prompt"][-1] + 1, 3]
        choice = {
            "text": "",
            "token_ids": ids,
            "logprobs": {"tokens": [f"token_id:{t}" for t in ids], "token_logprobs": [-0.5, None]},
            "finish_reason": "length" if body["max_tokens"] <= 2 else "stop",
        }
        return web.json_response({"choices": [choice]})


@pytest_asyncio.fixture
async def policy() -> AsyncIterator[tuple[str, Completions]]:
    completions = Completions()
    app = web.Application()
    app.router.add_post("/v1/completions", completions.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1", completions
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_generation_answers_each_sample_as_nemo_rl_vllm_worker_does(
    policy: tuple[str, Completions],
) -> None:
    url, completions = policy
    cfg = {
        "max_new_tokens": 8,
        "temperature": 1.0,
        "top_p": 1.0,
        "stop_strings": None,
        "vllm_cfg": {"async_engine": True, "max_model_len": 6},
        "_pad_token_id": 0,
    }
    generation = type("Generation", (HttpGeneration,), {"batches": dict})(context(url), cfg, Stop())
    data = {
        "input_ids": torch.tensor([[5, 6, 7, 0], [9, 10, 11, 12]]),
        "input_lengths": torch.tensor([3, 4]),
        "stop_strings": [None, ["</s>"]],
    }
    answers = dict([item async for item in generation.generate_async(data)])
    first, second = answers[0], answers[1]
    assert first["output_ids"].tolist() == [[5, 6, 7, 8, 3]]
    assert first["logprobs"].tolist() == [[0.0, 0.0, 0.0, -0.5, 0.0]]  # a missing logprob stays 0
    assert first["generation_lengths"].tolist() == [2]
    assert first["unpadded_sequence_lengths"].tolist() == [5]
    assert first["truncated"].tolist() == [False]
    assert second["truncated"].tolist() == [True]  # only 6 - 4 = 2 tokens fit: max_tokens=2
    by_prompt = {tuple(body["prompt"]): body for body in completions.bodies}
    assert by_prompt[(5, 6, 7)]["max_tokens"] == 3
    assert "stop" not in by_prompt[(5, 6, 7)]
    assert by_prompt[(9, 10, 11, 12)]["stop"] == ["</s>"]
    assert by_prompt[(9, 10, 11, 12)]["logprobs"] == 0


def test_the_worker_thread_is_stopped_when_the_collection_is_cancelled() -> None:
    from pytest_rollout_chaos.collector.adapters.nemo_rl_interfaces import on_worker_thread

    stop = Stop()
    entered, ended = threading.Event(), threading.Event()

    def work() -> None:  # stands for validate(): its own event loop, a call that would never end
        async def forever() -> None:
            stop.watch(asyncio.get_running_loop())
            entered.set()
            await asyncio.sleep(3600)

        try:
            asyncio.run(forever())
        finally:
            ended.set()

    async def cancel_it() -> None:
        task = asyncio.ensure_future(on_worker_thread(work, stop))
        await asyncio.to_thread(entered.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())
    assert ended.wait(5)
    with pytest.raises(Exception, match="cancelled"):
        stop.check()
