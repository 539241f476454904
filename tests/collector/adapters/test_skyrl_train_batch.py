"""SkyRL's step past the generator (``skyrl_train_batch``) on every pinned tree, without the stack.

A hand-made ``GeneratorOutput`` goes through ``RayPPOTrainer``'s own ``postprocess_generator_output``,
``convert_to_training_input``, ``fwd_logprobs_values_reward``, ``compute_advantages_and_returns`` and
``train_critic_and_policy``; what the policy's ``forward_backward`` is handed is the batch read
back. PR #1986's placeholder (reward 0, loss mask ``[0]``) is in it, as SkyRL trains it: alone in
its group it moves no advantage; in a group of four its zero enters the siblings' baseline and
gives them an advantage they would not have had.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_rollout_chaos.collector.adapters import skyrl, skyrl_train_batch, skyrl_upstream
from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.errors import NotJudgedError
from tests.collector.adapters import _skyrl_trees as trees

PAD = 1


@pytest.fixture(scope="module", params=[trees.BASE, trees.HEAD, trees.MAIN])
def skyrl_tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One pinned tree's ``skyrl`` imported (by name), without the stack; once per tree (the
    trainer's imports take seconds)."""
    with trees.importable(trees.unpack(request.param, tmp_path_factory.mktemp("skyrl"))):
        yield request.param


def config(*, n: int, prompts: int, loss_reduction: str = "token_mean") -> Any:
    """``SkyRLTrainConfig()`` with what the adapter sets for a step of ``prompts`` groups of ``n``."""
    made: Any = importlib.import_module(skyrl_upstream.CONFIG_MODULE).SkyRLTrainConfig()
    made.generator.n_samples_per_prompt = n
    made.trainer.train_batch_size = prompts
    made.trainer.policy_mini_batch_size = prompts
    made.trainer.algorithm.loss_reduction = loss_reduction
    return made


def output(rewards: list[float | None]) -> dict[str, Any]:
    """One sample per reward: two response tokens, both trained; None is PR #1986's placeholder."""
    placeholder = [reward is None for reward in rewards]
    return {
        "prompt_token_ids": [[5, 6, 7] for _ in rewards],
        "response_ids": [[PAD] if hole else [10, 11] for hole in placeholder],
        "rewards": [[0.0] if reward is None else [0.0, reward] for reward in rewards],
        "loss_masks": [[0] if hole else [1, 1] for hole in placeholder],
        "stop_reasons": ["rollout_error" if hole else "stop" for hole in placeholder],
        "rollout_logprobs": [[0.0] if hole else [-0.5, -0.25] for hole in placeholder],
        "rollout_metrics": None,
    }


def step(rewards: list[float | None], *, n: int, loss_reduction: str = "token_mean") -> list[Any]:
    made_config = config(n=n, prompts=len(rewards) // n, loss_reduction=loss_reduction)
    made = skyrl_train_batch.trainer(made_config, SimpleNamespace(pad_token_id=PAD), generator=None)
    uids = [str(position // n) for position in range(len(rewards))]
    return skyrl_train_batch.train_step(made, output(rewards), uids)


def advantages(trained: list[Any]) -> list[float]:
    """Each sample's advantage, as the policy's loss would weigh its tokens (summed over them)."""
    return [
        float(row.sum())
        for staged in trained
        for row in (staged.data["advantages"] * staged.data["loss_mask"])
    ]


def test_the_policy_is_handed_every_sample_the_placeholder_with_its_zero_loss_mask(skyrl_tree: str) -> None:
    trained = step([1.0, None, 1.0, 0.0], n=1)
    assert skyrl_train_batch.loss_masks(trained) == [[1, 1], [0], [1, 1], [1, 1]]
    rollouts = [Rollout(index, "aborted" if index == 1 else "completed") for index in range(4)]
    marked = skyrl_train_batch.marked(rollouts, trained, config(n=1, prompts=4))
    assert [(r.in_train_batch, r.loss_mask) for r in marked] == [
        (True, [1, 1]),
        (True, [0]),
        (True, [1, 1]),
        (True, [1, 1]),
    ]
    reduction = marked[1].loss_reduction
    assert reduction is not None
    assert reduction.per_token
    assert reduction.setting == "trainer.algorithm.loss_reduction = 'token_mean'"
    assert advantages(trained)[1] == 0.0


def test_a_placeholder_in_a_group_gives_its_siblings_an_advantage(skyrl_tree: str) -> None:
    """Four right answers have no variance (advantage 0); three and a placeholder's 0 do."""
    whole = advantages(step([1.0, 1.0, 1.0, 1.0], n=4))
    holed = advantages(step([1.0, None, 1.0, 1.0], n=4))
    assert whole == [0.0, 0.0, 0.0, 0.0]
    assert all(value > 0 for position, value in enumerate(holed) if position != 1), holed


def test_a_sequence_mean_is_no_per_token_reduction(skyrl_tree: str) -> None:
    made = config(n=1, prompts=2, loss_reduction="sequence_mean")
    reduction = skyrl_train_batch.loss_reduction(made)
    assert not reduction.per_token
    assert reduction.setting == "trainer.algorithm.loss_reduction = 'sequence_mean'"


def test_a_branch_of_train_the_step_does_not_follow_is_an_error(skyrl_tree: str) -> None:
    made = config(n=1, prompts=1)
    made.trainer.algorithm.use_kl_in_reward = True
    with pytest.raises(ValueError, match=r"use_kl_in_reward = True takes a branch of RayPPOTrainer.train"):
        skyrl_train_batch.trainer(made, SimpleNamespace(pad_token_id=PAD), generator=None)


def test_a_count_the_rows_do_not_match_is_an_error(skyrl_tree: str) -> None:
    trained = step([1.0, 0.0], n=1)
    with pytest.raises(ValueError, match=r"handed 2 samples for 3 rows"):
        skyrl_train_batch.marked([Rollout(i, "completed") for i in range(3)], trained, config(n=1, prompts=2))


def test_a_tree_whose_train_changed_is_not_judged(skyrl_tree: str, tmp_path: Any) -> None:
    source = skyrl_train_batch.COPIED.source_file()
    assert source is not None
    assert skyrl_train_batch.COPIED.stale(source) is None
    changed = tmp_path / "trainer.py"
    changed.write_text(source.read_text().replace("self.global_step += 1", "self.global_step += 2"))
    with pytest.raises(NotJudgedError, match=r"RayPPOTrainer.train changed since the adapter's copy"):
        skyrl_train_batch.COPIED.require(changed)


def test_the_read_out_point_and_the_trainers_stand_ins_are_listed() -> None:
    """Recorded with each call (``skyrl.STOOD_IN``): where the rollouts are read, and what of
    ``RayPPOTrainer`` does not run as SkyRL's own."""
    assert set(skyrl_train_batch.STOOD_IN) <= set(skyrl.STOOD_IN)
    [read_out] = [item for item in skyrl.STOOD_IN if item.startswith("the read-out point")]
    assert "forward_backward" in read_out
    assert any(item.startswith("WorkerDispatch") for item in skyrl.STOOD_IN)
    assert any(item.startswith("RayPPOTrainer.__init__") for item in skyrl.STOOD_IN)
