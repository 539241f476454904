"""``batched_env_eval`` on hand-built Histories: what the resources server recorded of each
``/step_batch`` call, held to one batched call per task group and turn in validation."""

from __future__ import annotations

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.batched_env_eval import BatchedEnvEval
from tests.invariants._builders import all_ok, observe


def _served(history: History, tasks: list[str], turn: int) -> None:
    """What the resources server records for one ``/step_batch`` call: each item's task and turn."""
    data = {"batch_size": len(tasks), "tasks": tasks, "turns": [turn] * len(tasks)}
    history.append("resources", "info", "step_batch", data)


def _env_steps(per_sample: bool) -> History:
    history = History()
    for turn in (1, 2):
        if per_sample:
            for _ in range(3):
                _served(history, ["math"], turn)
        else:
            _served(history, ["math"] * 3, turn)
        _served(history, ["code"], turn)
    return history


def test_batched_env_eval_fails_per_sample_steps_in_validation() -> None:
    verdict = BatchedEnvEval().check(observe(4, all_ok(4), history=_env_steps(True), mode="validation"))
    assert verdict.status is Status.FAIL
    assert (
        "per-sample env evaluation in validation: the environment served 8 env.step calls where 4 batched"
        in verdict.summary
    )
    assert "turn 1, task 'math': 3 calls (batch sizes [1, 1, 1])" in verdict.evidence


def test_batched_env_eval_passes_batched_steps_and_tolerates_train() -> None:
    assert BatchedEnvEval().check(
        observe(4, all_ok(4), history=_env_steps(False), mode="validation")
    ).status is (Status.PASS)
    train = BatchedEnvEval().check(observe(4, all_ok(4), history=_env_steps(True), mode="train"))
    assert train.status is Status.PASS
    assert "allowed in train" in train.summary


def test_batched_env_eval_judges_what_was_served_not_what_the_collector_says() -> None:
    history = History()
    for turn in (1, 2):  # the collector claims one call per task group, as a batched one would
        for task in ("math", "code"):
            history.append("collector", "info", "env_step", {"task": task, "batch_size": 2, "turn": turn})
        _served(history, ["math", "math", "code", "code"], turn)  # while one call mixes the groups
    for mode in ("validation", "train"):
        verdict = BatchedEnvEval().check(observe(4, all_ok(4), history=history, mode=mode))
        assert verdict.status is Status.FAIL, mode
        assert "2 env.step calls mixed task groups" in verdict.summary
        assert "2 of task 'code' at turn 1, 2 of task 'math' at turn 1" in verdict.summary


def test_batched_env_eval_not_judged_without_a_served_record_unknown_with_a_bare_one() -> None:
    assert BatchedEnvEval().check(observe(2, all_ok(2))).status is Status.NOT_JUDGED
    history = History()
    history.append("collector", "info", "env_step", {"task": "math", "batch_size": 1, "turn": 0})
    history.append("resources", "info", "step_batch", {"batch_size": 1, "tasks": ["math"]})
    verdict = BatchedEnvEval().check(observe(1, all_ok(1), history=history, mode="validation"))
    assert verdict.status is Status.UNKNOWN
    assert "do not say each item's task and turn" in verdict.summary
