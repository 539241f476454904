"""With Ray on, the ``nemo_rl`` adapter drives NeMo RL's ``NemoGym`` as a real Ray actor.

The in-process tests give the adapter a canned Gym client (no servers) and a local Ray cluster
(``_ray_session``): NeMo RL's caller and actor are the pinned tree's, and what they show is that
the actor runs in another process, that its death reaches the collector as Ray's own error, and
that it never outlives its collection. The catalog tests run scenarios in a child pytest with
Ray on: the verdicts of the stand-in actor hold with the real one.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import time
import weakref
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.collector.adapters import nemo_rl
from pytest_rollout_chaos.collector.context import load_tokenizer
from pytest_rollout_chaos.collector.gym_client import GymRequestError
from pytest_rollout_chaos.collector.protocol import CollectorContext, CollectorSettings
from pytest_rollout_chaos.history import History
from tests.catalog._verdicts import REPO, run_catalog
from tests.collector.adapters import _actor_seen
from tests.collector.adapters._nemo_rl_trees import BASE, HEAD, nemo_rl_tree, tree_imported
from tests.collector.adapters._ray_session import RAY_ON, ray_session

__all__ = ["ray_session"]  # the fixture, used by name

ROWS = 3
PROMPT = [1, 2, 3]
GENERATION = [4, 5]
LOGPROBS = [-0.5, -0.25]
DEADLINE_S = 120.0
ALL_TREES = (BASE, HEAD, "nemo-rl-3069f281", "nemo-rl-c6a661e8")

Result = tuple[dict[str, Any], dict[str, Any]]


class CannedGym:
    """A Gym client answering every row at once with one turn, or holding them until ``release``."""

    head_url = "http://127.0.0.1:9"

    def __init__(self, *, hold: bool = False, error: Exception | None = None) -> None:
        self.calls = 0
        self.called = asyncio.Event()
        self.release = asyncio.Event()
        if not hold:
            self.release.set()
        self._error = error

    def run_examples(self, rows: Sequence[Mapping[str, Any]]) -> Iterator[Awaitable[Result]]:
        self.calls += 1
        self.called.set()
        return (self._answer(dict(row)) for row in rows)

    async def _answer(self, row: dict[str, Any]) -> Result:
        await self.release.wait()
        if self._error is not None:
            raise self._error
        turn = {
            "type": "message",
            "role": "assistant",
            "prompt_token_ids": PROMPT,
            "generation_token_ids": GENERATION,
            "generation_log_probs": LOGPROBS,
        }
        return row, {"_rowidx": row["_rowidx"], "reward": 1.0, "response": {"output": [turn]}}


@pytest.fixture(scope="module")
def head_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """PR #2394's tree, first on ``sys.path``; ``sys.path`` and NeMo RL's modules restored after."""
    with tree_imported(HEAD, tmp_path_factory.mktemp("nemo-rl-ray")) as tree:
        yield tree


def context(gym: CannedGym, history: History) -> CollectorContext:
    tiny = bundled.tiny_model_dir()
    return CollectorContext(
        gym=gym,
        policy="http://127.0.0.1:9/v1",
        env=None,
        tokenizer=load_tokenizer(tiny),
        settings=CollectorSettings(),
        history=history,
        model="tiny",
        model_dir=tiny,
    )


def rows(count: int = ROWS) -> list[dict[str, Any]]:
    return [
        {
            "responses_create_params": {"input": [{"role": "user", "content": "2+2?"}]},
            "agent_ref": {"name": "calculator_agent"},
            "_rowidx": index,
        }
        for index in range(count)
    ]


def upstream_events(history: History, call: str) -> list[dict[str, Any]]:
    return [
        dict(event.data) for event in history if event.op == "upstream" and event.data.get("call") == call
    ]


def started_actor(history: History) -> dict[str, Any]:
    """The History's record of the actor this collector started."""
    started = upstream_events(history, "ray.remote(NemoGym)")
    assert len(started) == 1, (
        f"expected one 'ray.remote(NemoGym)' event (the real actor started), got {started}: "
        f"did the adapter use its stand-in with Ray on?\n{history.timeline()}"
    )
    return started[0]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_nemo_gym_runs_as_a_ray_actor_in_another_process_and_dies_with_its_collection(
    ray_session: Any, head_tree: Path
) -> None:
    history = History()
    gym = CannedGym()
    collector = nemo_rl.NemoRLCollector(context(gym, history))
    started = started_actor(history)
    assert started["pid"] != os.getpid(), started
    assert started["options"] == {"max_restarts": -1, "max_task_retries": -1, "num_cpus": 0}
    actor = ray_session.get_actor(started["actor"])  # alive before the collection

    rollouts = await asyncio.wait_for(collector.collect(rows(), mode="train"), DEADLINE_S)

    assert [rollout.row_index for rollout in rollouts] == list(range(ROWS))
    assert rollouts[0].turns[0].prompt_token_ids == PROMPT
    assert rollouts[0].turns[0].generation_token_ids == GENERATION
    assert gym.calls == 1  # through the relay, from the actor's process
    assert upstream_events(history, "NemoGym.run_rollouts.remote") == [
        {"call": "NemoGym.run_rollouts.remote"}
    ]
    assert upstream_events(history, "ray.kill") == [
        {"call": "ray.kill", "actor": started["actor"], "dead": True}
    ]
    with pytest.raises(ray_session.exceptions.RayActorError):
        ray_session.get(actor.__ray_ready__.remote(), timeout=30)


async def held_in_run_rollouts(history: History) -> asyncio.Future[list[Any]]:
    """A train collection started and held inside the actor's ``run_rollouts`` (the canned Gym holds)."""
    gym = CannedGym(hold=True)
    collector = nemo_rl.NemoRLCollector(context(gym, history))
    collect = asyncio.ensure_future(collector.collect(rows(), mode="train"))
    await asyncio.wait_for(gym.called.wait(), DEADLINE_S)
    return collect


@pytest.mark.slow
@pytest.mark.asyncio
async def test_an_actor_killed_mid_collection_raises_rays_actor_died_error_from_the_collector(
    ray_session: Any, head_tree: Path
) -> None:
    history = History()
    collect = await held_in_run_rollouts(history)

    ray_session.kill(ray_session.get_actor(started_actor(history)["actor"]), no_restart=True)

    with pytest.raises(ray_session.exceptions.ActorDiedError):
        await asyncio.wait_for(collect, DEADLINE_S)
    (failed,) = [event.data for event in history if event.kind == "fail" and event.op == "collect"]
    assert failed["error"].startswith("ActorDiedError"), failed


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_cancelled_collection_kills_its_actor_and_a_collector_never_used_does_too(
    ray_session: Any, head_tree: Path
) -> None:
    history = History()
    collect = await held_in_run_rollouts(history)
    cancelled = started_actor(history)["actor"]

    collect.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(collect, 10)  # the scenario runner grants 5 s; the kill waits 3 at most

    assert upstream_events(history, "ray.kill") == [{"call": "ray.kill", "actor": cancelled, "dead": True}]
    unused_history = History()
    unused = nemo_rl.NemoRLCollector(context(CannedGym(), unused_history))
    handle = ray_session.get_actor(started_actor(unused_history)["actor"])
    held = weakref.ref(unused)
    del unused
    gc.collect()
    assert held() is None, f"the unused collector is still held by {gc.get_referrers(held())}"
    assert _dead_within(ray_session, handle, 60), "the unused collector's actor outlived it"


def _dead_within(ray: Any, handle: Any, seconds: float) -> bool:
    """Whether Ray says the actor is dead within ``seconds``. ``ray.kill`` is asynchronous: a call
    sent just after it may still be answered, or wait unanswered while the kill goes through a
    loaded cluster, so ask again, a few seconds a call, until Ray says dead (as the collector's own
    kill does)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            ray.get(handle.__ray_ready__.remote(), timeout=min(left, 5))
        except ray.exceptions.RayActorError:
            return True
        except ray.exceptions.GetTimeoutError:
            continue
        time.sleep(0.2)
    return False


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_gym_clients_error_crosses_ray_to_the_caller(ray_session: Any, head_tree: Path) -> None:
    error = GymRequestError("calculator_agent", "http://127.0.0.1:9/run", 500, "boom")
    collector = nemo_rl.NemoRLCollector(context(CannedGym(error=error), History()))

    with pytest.raises(ray_session.exceptions.RayTaskError) as raised:
        await asyncio.wait_for(collector.collect(rows(), mode="train"), DEADLINE_S)

    cause = raised.value.cause
    assert isinstance(cause, GymRequestError), repr(cause)
    assert (cause.server, cause.status, cause.reason) == ("calculator_agent", 500, "boom")


_DETECT = """
import inspect, json, sys
from pytest_rollout_chaos.collector.adapters import nemo_rl_actor, nemo_rl_trainer
trainer = nemo_rl_trainer.load_trainer()
plain = trainer.remote_class.__ray_metadata__.modified_class.__ray_actor_class__
actor = nemo_rl_actor.actor_class(plain)
print(json.dumps({
    "streaming": trainer.streaming,
    "actor_streams": inspect.isasyncgenfunction(actor.run_rollouts),
    "same_method": actor.run_rollouts is plain.run_rollouts,
    "root": str(trainer.root),
}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_TREES)
def test_the_actor_keeps_the_trees_run_rollouts_and_its_api(name: str, tmp_path: Path) -> None:
    tree = nemo_rl_tree(name, tmp_path)
    completed = subprocess.run(
        [sys.executable, "-c", _DETECT],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(REPO)])},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    assert found == {
        "streaming": False,  # every pinned tree returns one list
        "actor_streams": False,
        "same_method": True,
        "root": str(tree.resolve()),
    }


# -- the catalog, in a child pytest with Ray on ----------------------------------------------------


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    into = tmp_path_factory.mktemp("nemo-rl-trees")
    return {name: nemo_rl_tree(name, into) for name in (BASE, HEAD)}


def with_ray(tmp_path: Path, tree: Path, scenarios: list[str]) -> dict[str, Any]:
    """``scenarios`` by ``nemo_rl`` over ``tree`` in a child pytest with Ray on; each scenario's
    verdicts, checked to have been collected through a real actor in another process."""
    scratch = tmp_path / tree.name
    scratch.mkdir()
    verdicts = run_catalog(
        scratch,
        target="nemo_rl",
        scenarios=scenarios,
        stack_args=[
            *RAY_ON,
            "-p",
            "tests.collector.adapters._actor_seen",
            f"--rollout-chaos-upstream={tree}",
        ],
    )
    seen = actors_seen(scratch / "junit-nemo_rl.xml")
    assert sorted(seen) == sorted(scenarios), f"scenarios with a record of their actors: {seen}"
    for name, record in seen.items():
        actors = record["actors"]
        assert len(actors) == 1, f"{name}: expected one NemoGym Ray actor, the History shows {actors}"
        assert actors[0]["call"] == "ray.remote(NemoGym)", (name, record)
        assert actors[0]["pid"] != record["pytest_pid"], (
            f"{name}: the actor ran in pytest's process: {record}"
        )
    return verdicts


def actors_seen(junit: Path) -> dict[str, dict[str, Any]]:
    """Per scenario, what ``tests.collector.adapters._actor_seen`` recorded in the child's JUnit XML."""
    seen = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        properties = {item.get("name", ""): item.get("value", "") for item in case.iter("property")}
        if _actor_seen.PROPERTY in properties:
            seen[properties["scenario"]] = json.loads(properties[_actor_seen.PROPERTY])
    return seen


@pytest.mark.slow
def test_with_the_real_actor_the_fixed_tree_passes_baseline_and_short_results(
    tmp_path: Path, trees: dict[str, Path]
) -> None:
    verdicts = with_ray(tmp_path, trees[HEAD], ["baseline", "short-results"])
    assert verdicts["baseline"].passed, verdicts["baseline"].message
    assert verdicts["short-results"].passed, verdicts["short-results"].message


@pytest.mark.slow
def test_with_the_real_actor_the_pre_fix_tree_still_fails_short_results(
    tmp_path: Path, trees: dict[str, Path]
) -> None:
    verdicts = with_ray(tmp_path, trees[BASE], ["short-results"])
    assert not verdicts["short-results"].passed
    assert "no_silent_short_count" in verdicts["short-results"].message, verdicts["short-results"].message
