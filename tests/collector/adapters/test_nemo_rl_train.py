"""The ``nemo_rl`` adapter in train mode: NeMo RL's own code decides the short-results verdict.

The gate (``test_gates``): on the tree before PR #2394 ``short-results`` fails (NeMo RL's caller
trips over the ``None`` slot of a row the Gym never returned), on the PR's head it passes. Two
adapters broken on purpose (``_nemo_rl_broken``) each defeat that gate, so it guards the adapter's
fidelity too. The fast tests below pin the pieces that need no trainer: the Ray seam and the mapping.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_rollout_chaos.collector.adapters import nemo_rl_final_batch, nemo_rl_ray, nemo_rl_train_batch
from pytest_rollout_chaos.collector.protocol import Turn
from tests.catalog._verdicts import ScenarioVerdicts, run_catalog
from tests.collector.adapters._nemo_rl_trees import BASE, HEAD, nemo_rl_tree
from tests.collector.adapters._train_batch import NOT_READ, train_batch_summary
from tests.collector.adapters._trees import REPO

SCENARIO = "short-results"
FIX_ERROR = "NeMo Gym returned only 4 rollouts but 6 were requested"


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    into = tmp_path_factory.mktemp("nemo-rl-trees")
    return {name: nemo_rl_tree(name, into) for name in (BASE, HEAD)}


def short_results(tmp_path: Path, tree: Path, target: str = "nemo_rl") -> ScenarioVerdicts:
    """``short-results`` run by ``target`` over NeMo RL ``tree``, in a child pytest."""
    scratch = tmp_path / f"{tree.name}-{target.rpartition(':')[2]}"
    scratch.mkdir()
    verdicts = run_catalog(
        scratch, target=target, scenarios=[SCENARIO], stack_args=[f"--rollout-chaos-upstream={tree}"]
    )
    return verdicts[SCENARIO]


def gate_problems(base: ScenarioVerdicts, head: ScenarioVerdicts) -> list[str]:
    """What keeps the pair from being the gate: the pre-fix tree red, the fixed tree green."""
    problems = []
    if base.passed:
        problems.append(f"{SCENARIO} passed on the pre-fix tree {BASE}")
    if not head.passed:
        problems.append(f"{SCENARIO} failed on the fixed tree {HEAD}:\n{head.message}")
    return problems


@pytest.mark.slow
def test_an_adapter_that_checks_the_count_itself_makes_the_pre_fix_tree_look_fixed(
    tmp_path: Path, trees: dict[str, Path]
) -> None:
    base = short_results(tmp_path, trees[BASE], "tests.collector.adapters._nemo_rl_broken:count_checking")
    assert base.passed, base.message
    assert gate_problems(base, short_results(tmp_path, trees[HEAD])) != []


@pytest.mark.slow
def test_an_adapter_that_pads_missing_rows_hides_the_fix(tmp_path: Path, trees: dict[str, Path]) -> None:
    target = "tests.collector.adapters._nemo_rl_broken:padding"
    base = short_results(tmp_path, trees[BASE], target)
    head = short_results(tmp_path, trees[HEAD], target)
    problems = gate_problems(base, head)
    assert len(problems) == 1, problems
    assert "failed on the fixed tree" in problems[0], problems
    # Every row came back on both trees: the fix's RuntimeError never fired.
    assert FIX_ERROR not in head.message
    assert "returned 6 rollouts" in head.message


@pytest.mark.slow
def test_rows_are_read_from_the_train_data_and_an_adapter_that_stops_at_the_rollout_is_caught(
    tmp_path: Path, trees: dict[str, Path]
) -> None:
    """The real adapter's rows come from ``grpo_train``'s ``train_data`` and say they are in it;
    one that reads the caller's ``final_batch`` (``_nemo_rl_broken:generation_only``) says nothing
    of a train batch, which ``train_batch_sound`` shows."""
    stack = [f"--rollout-chaos-upstream={trees[HEAD]}"]
    real = train_batch_summary(tmp_path, target="nemo_rl", scenario="baseline", stack_args=stack)
    broken = train_batch_summary(
        tmp_path,
        target="tests.collector.adapters._nemo_rl_broken:generation_only",
        scenario="baseline",
        stack_args=stack,
    )
    assert "each of the 8 samples in the train batch is" in real, real
    assert NOT_READ not in real, real
    assert NOT_READ in broken, broken


# -- the pieces that need no trainer --------------------------------------------------------------


GROUPED_BATCH = """
import json, sys
from pathlib import Path
from pytest_rollout_chaos.collector.adapters.upstream import use_tree
use_tree(Path(sys.argv[1]))
from nemo_rl.distributed.batched_data_dict import BatchedDataDict
from pytest_rollout_chaos.collector.adapters import nemo_rl_trainer
rows = [{"q": q, "_rowidx": 3 * p + g} for p, q in enumerate("ab") for g in range(3)]
batch = nemo_rl_trainer.input_batch(BatchedDataDict, rows)
env = batch["extra_env_info"]
print(json.dumps([[row["q"], row["_rowidx"]] for row in env] + [len({id(row) for row in env})]))
"""


@pytest.mark.slow
def test_the_input_batch_is_one_datum_per_prompt_repeated_per_generation_by_nemo_rl(
    trees: dict[str, Path],
) -> None:
    """``grpo_train``'s ``repeat_interleave`` makes the groups: each prompt's first row, deep-copied
    per generation (the caller renumbers ``_rowidx`` by position, which is the workload's layout)."""
    done = subprocess.run(
        [sys.executable, "-c", GROUPED_BATCH, str(trees[HEAD])],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    *members, distinct = json.loads(done.stdout.strip().splitlines()[-1])
    assert members == [["a", 0]] * 3 + [["b", 3]] * 3
    assert distinct == 6


def test_turns_carry_every_earlier_token_as_their_prompt_and_keep_nan_logprobs() -> None:
    log = [
        {"role": "user", "content": "", "token_ids": [1, 2]},
        {"role": "assistant", "content": "", "token_ids": [3], "generation_logprobs": [-0.5]},
        {"role": "user", "content": "", "token_ids": [4]},
        {"role": "assistant", "content": "", "token_ids": [5, 6], "generation_logprobs": [math.nan, -1.0]},
    ]
    first, second = nemo_rl_final_batch.turns_from_message_log(log)
    assert first == Turn([1, 2], [3], [-0.5])
    assert second.prompt_token_ids == [1, 2, 3, 4]
    assert second.generation_token_ids == [5, 6]
    assert math.isnan(second.generation_log_probs[0])


def test_train_data_rows_are_cut_into_turns_at_message_boundaries_inside_the_loss_mask() -> None:
    """Two assistant messages in a row are two turns; tokens out of the loss mask are prompt; the
    logprobs are the flat ``generation_logprobs`` (NaN kept); every row is in the train batch, its
    loss mask ``token_mask * sample_mask`` over the turns' tokens (all zero for a masked row)."""
    log = [
        {"role": "user", "token_ids": [1, 2]},
        {"role": "assistant", "token_ids": [3]},
        {"role": "assistant", "token_ids": [4, 5]},
        {"role": "tool", "token_ids": [6]},
        {"role": "assistant", "token_ids": [7]},
    ]
    train_data = {
        "input_ids": [[1, 2, 3, 4, 5, 6, 7, 0]],
        "input_lengths": [7],
        "token_mask": [[0, 0, 1, 1, 1, 0, 1, 0]],
        "generation_logprobs": [[0.0, 0.0, -0.5, math.nan, -1.0, 0.0, -2.0, 0.0]],
        "sample_mask": [1.0],
    }
    repeated = {"message_log": [log], "truncated": [False]}
    batch = nemo_rl_train_batch.TrainBatch(train_data, repeated, [0.25], complete=True)
    [rollout] = nemo_rl_train_batch.rollouts([{"_rowidx": 5}], batch, attempts=1)
    assert rollout is not None
    assert (rollout.row_index, rollout.status, rollout.reward, rollout.in_train_batch) == (
        5,
        "completed",
        0.25,
        True,
    )
    assert [turn.generation_token_ids for turn in rollout.turns] == [[3], [4, 5], [7]]
    assert [turn.prompt_token_ids for turn in rollout.turns] == [[1, 2], [1, 2, 3], [1, 2, 3, 4, 5, 6]]
    assert rollout.turns[0].generation_log_probs == [-0.5]
    assert math.isnan(rollout.turns[1].generation_log_probs[0])
    assert rollout.loss_mask == [1, 1, 1, 1]
    masked_data = {**train_data, "sample_mask": [0.0]}
    masked = nemo_rl_train_batch.TrainBatch(masked_data, repeated, [0.25], complete=True)
    [dropped] = nemo_rl_train_batch.rollouts([{"_rowidx": 5}], masked, attempts=1)
    assert dropped is not None
    assert (dropped.in_train_batch, dropped.loss_mask) == (True, [0, 0, 0, 0])
    incomplete = nemo_rl_train_batch.TrainBatch(None, repeated, [0.25], complete=False)
    [left_out] = nemo_rl_train_batch.rollouts([{"_rowidx": 5}], incomplete, attempts=1)
    assert left_out is not None
    assert (left_out.in_train_batch, left_out.turns) == (False, [])


def test_a_row_missing_from_the_batch_stays_missing() -> None:
    rows = [{"_rowidx": 0}, {"_rowidx": 1}]
    message_log = [[{"role": "assistant", "token_ids": [7], "generation_logprobs": [-0.1]}]]
    batch = {"message_log": message_log, "total_reward": [1.0], "truncated": [True]}
    rollouts = nemo_rl_final_batch.rollouts_from_batch(rows, batch, attempts=1)
    assert rollouts[1] is None
    assert rollouts[0] is not None
    assert (rollouts[0].row_index, rollouts[0].status, rollouts[0].reward) == (0, "truncated", 1.0)


class _Actor:
    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def run_rollouts(self, rows: list[int], prefix: str) -> tuple[list[int], str]:
        return [row * 2 for row in rows], prefix

    async def hang(self) -> None:
        await self.release.wait()

    async def stream(self, count: int) -> Any:
        for item in range(count):
            yield item


def _caller_module() -> Any:
    """A stand-in for ``nemo_rl.experience.rollouts``: its ``ray.get`` must never be the real one."""
    return SimpleNamespace(ray=SimpleNamespace(get=lambda refs: pytest.fail("the real ray.get was called")))


@pytest.mark.asyncio
async def test_the_caller_blocks_in_ray_get_on_its_thread_while_the_actor_runs_on_the_loop() -> None:
    loop = asyncio.get_running_loop()
    handle = nemo_rl_ray.ActorHandle(_Actor(), loop)
    module = _caller_module()
    real = module.ray
    with nemo_rl_ray.ray_get_faked(module):
        result = await nemo_rl_ray.in_thread(
            loop,
            lambda: (
                threading.current_thread().name,
                module.ray.get(handle.run_rollouts.remote([1, 2], "t")),
            ),
        )
    assert result == ("nemo-rl-caller", ([2, 4], "t"))
    assert module.ray is real


@pytest.mark.asyncio
async def test_a_streaming_method_is_consumed_as_rays_streaming_generator() -> None:
    loop = asyncio.get_running_loop()
    handle = nemo_rl_ray.ActorHandle(_Actor(), loop)

    def consume() -> list[int]:
        async def drain() -> list[int]:
            stream = handle.stream.options(num_returns="streaming").remote(3)
            assert isinstance(stream, nemo_rl_ray.ObjectRefStream)
            return [await ref async for ref in stream]

        return asyncio.run(drain())

    assert await nemo_rl_ray.in_thread(loop, consume) == [0, 1, 2]


@pytest.mark.asyncio
async def test_cancelling_the_pending_actor_calls_releases_a_caller_blocked_in_ray_get() -> None:
    loop = asyncio.get_running_loop()
    handle = nemo_rl_ray.ActorHandle(_Actor(), loop)
    module = _caller_module()
    with nemo_rl_ray.ray_get_faked(module):
        blocked = asyncio.ensure_future(
            nemo_rl_ray.in_thread(loop, lambda: module.ray.get(handle.hang.remote()))
        )
        await asyncio.sleep(0.05)
        started = time.monotonic()
        handle.cancel_pending()
        with pytest.raises(concurrent.futures.CancelledError):
            await asyncio.wait_for(blocked, timeout=5)
    assert time.monotonic() - started < 5


@pytest.mark.slow
def test_a_tree_whose_grpo_train_changed_is_not_judged_never_run_through_the_stale_copy(
    tmp_path: Path, trees: dict[str, Path]
) -> None:
    """A copy of the pre-fix tree with one statement of ``grpo_train`` changed (as NeMo RL #3000
    changed it): the adapter declines ``short-results`` (NOT_JUDGED, naming the function, file and
    line) where the unchanged tree fails it."""
    edited = tmp_path / "nemo-rl-edited"
    shutil.copytree(trees[BASE], edited)
    grpo = edited / "nemo_rl" / "algorithms" / "grpo.py"
    source = grpo.read_text()
    start = source.index("def grpo_train(")
    call = source.index("dynamic_sampling(", start)
    grpo.write_text(source[:call] + "dynamic_sampling(*(), " + source[call + len("dynamic_sampling(") :])
    line = source[:start].count("\n") + 1
    declined = short_results(tmp_path, edited)
    assert not declined.passed
    assert declined.skipped is not None, declined.message
    assert declined.skipped.startswith("NOT_JUDGED: grpo_train changed since the adapter's copy ("), declined
    assert f"nemo_rl/algorithms/grpo.py:{line}, fingerprint " in declined.skipped
