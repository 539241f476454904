"""isolated_failures, batched_env_eval, bounded and root_cause_visible on hand-built Histories."""

from __future__ import annotations

import asyncio

from pytest_rollout_chaos.collector.protocol import InfrastructureError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.batched_env_eval import BatchedEnvEval
from pytest_rollout_chaos.invariants.bounded import Bounded
from pytest_rollout_chaos.invariants.isolated_failures import IsolatedFailures
from pytest_rollout_chaos.invariants.no_empty_epoch import NoEmptyEpoch
from pytest_rollout_chaos.invariants.root_cause_visible import RootCauseVisible
from tests.invariants._builders import all_ok, observe, rollout


def _one_bad_row() -> History:
    history = History()
    history.append("fault", "info", "inject", {"fault": "trajectory_exception", "target": "agent", "row": 1})
    history.append("agent", "invoke", "POST /run", {"row": 1}, request_id="r1")
    history.append("agent", "fail", "POST /run", {"row": 1, "status": 500}, request_id="r1")
    return history


def test_isolated_failures_fails_when_one_trajectory_takes_the_batch_down() -> None:
    verdict = IsolatedFailures().check(observe(4, None, history=_one_bad_row(), raised=RuntimeError("boom")))
    assert verdict.status is Status.FAIL
    assert "gather without isolation: 1 trajectory(ies) failed (rows [1])" in verdict.summary
    assert "losing 3 healthy siblings [0, 2, 3]" in verdict.summary


def test_isolated_failures_passes_when_only_the_bad_row_aborts() -> None:
    outcome = all_ok(4)
    outcome[1] = rollout(1, "aborted", error="HTTP 500 from agent")
    assert IsolatedFailures().check(observe(4, outcome, history=_one_bad_row())).status is Status.PASS


def test_isolated_failures_fails_when_siblings_are_aborted_or_missing() -> None:
    outcome = [rollout(0, "aborted", error="cancelled"), rollout(1, "aborted", error="HTTP 500"), rollout(2)]
    verdict = IsolatedFailures().check(observe(4, outcome, history=_one_bad_row()))
    assert verdict.status is Status.FAIL
    assert "siblings [0, 3] were lost or aborted" in verdict.summary


def test_isolated_failures_allows_raising_under_infrastructure_faults() -> None:
    history = _one_bad_row()
    history.append("process", "info", "exit", {"server": "agent-0", "code": -9})
    raised = InfrastructureError("agent unreachable")
    assert IsolatedFailures().check(observe(4, None, history=history, raised=raised)).status is Status.PASS


def test_isolated_failures_allows_raising_when_most_rows_failed() -> None:
    history = History()
    for row in (0, 1, 2):
        history.append("agent", "fail", "POST /run", {"row": row, "status": 500})
    assert IsolatedFailures().check(observe(4, None, history=history, raised=RuntimeError("x"))).status is (
        Status.PASS
    )


def test_isolated_failures_is_not_judged_without_failures() -> None:
    assert IsolatedFailures().check(observe(2, all_ok(2))).status is Status.NOT_JUDGED


def _named_not_touched(*, touched: int | None = None, changed: int = 2) -> History:
    """A fault whose inject names row 1 and whose rule no request of row 1 passed through; with
    ``touched``, its rule hit a request of that row instead (and changed ``changed`` values)."""
    history = History()
    inject = {"fault": "nan_logprobs", "target": "policy", "row": 1, "rule": "r1"}
    history.append("fault", "info", "inject", inject)
    for row in range(4):
        facts = {"link": "collector->agent:calculator_agent", "server": "calculator_agent", "row": row}
        history.append("agent", "invoke", "POST /run", facts, request_id=f"run{row}")
        history.append("agent", "ok", "POST /run", {**facts, "status": 200}, request_id=f"run{row}")
    if touched is not None:
        hook = {"effect": "nan_logprobs", "rule": "r1", "row": touched, "route": "/v1/chat/completions"}
        history.append("policy", "info", "hook", {**hook, "link": "model->policy", "changed": changed})
    return history


def test_isolated_failures_names_no_victim_of_a_fault_that_touched_nothing() -> None:
    history = _named_not_touched()
    raised = IsolatedFailures().check(observe(4, None, history=history, raised=RuntimeError("boom")))
    assert raised.status is Status.NOT_JUDGED, raised.render()
    outcome = all_ok(4)
    outcome[1] = rollout(1, "aborted", error="row 1 was named by a fault")
    history.append("agent", "fail", "POST /run", {"row": 2, "status": 500})
    outcome[2] = rollout(2, "aborted", error="HTTP 500 from agent")
    verdict = IsolatedFailures().check(observe(4, outcome, history=history))
    assert verdict.status is Status.FAIL, verdict.render()
    assert "rows [2] failed and siblings [1] were lost or aborted" in verdict.summary


def test_isolated_failures_counts_a_row_the_fault_layer_saw_a_rule_change() -> None:
    outcome = all_ok(4)
    outcome[3] = rollout(3, "aborted", error="non-finite logprob nan")
    touched = IsolatedFailures().check(observe(4, outcome, history=_named_not_touched(touched=3)))
    assert touched.status is Status.PASS, touched.render()
    assert "rows [3] failed" in touched.summary
    unchanged = _named_not_touched(touched=3, changed=0)  # the rule fired and rewrote nothing
    assert IsolatedFailures().check(observe(4, all_ok(4), history=unchanged)).status is Status.NOT_JUDGED


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


def test_bounded_fails_a_hang_and_names_what_it_waited_on() -> None:
    history = History()
    history.append("agent", "invoke", "POST /run", {"row": 0}, request_id="a")
    history.append("agent", "invoke", "POST /run", {"row": 1}, request_id="b")
    history.append("agent", "ok", "POST /run", {"row": 1, "status": 200}, request_id="b")
    verdict = Bounded().check(observe(2, None, history=history, elapsed_s=12.0, timed_out=True))
    assert verdict.status is Status.FAIL
    assert "hung: still running after 12.00s (deadline 10.00s)" in verdict.summary
    waiting = verdict.evidence[: verdict.evidence.index("last events:")]
    assert len(waiting) == 2
    assert "row=0" in waiting[1]


def test_bounded_passes_in_time_even_when_raising() -> None:
    assert Bounded().check(observe(2, all_ok(2), elapsed_s=3.0)).status is Status.PASS
    assert Bounded().check(observe(2, None, raised=RuntimeError("x"), elapsed_s=3.0)).status is Status.PASS
    assert Bounded().check(observe(2, all_ok(2), elapsed_s=30.0)).status is Status.FAIL


def test_root_cause_visible_fails_a_bare_cancelled_error() -> None:
    verdict = RootCauseVisible().check(observe(2, None, raised=asyncio.CancelledError()))
    assert verdict.status is Status.FAIL
    assert "root cause is hidden" in verdict.summary


def test_root_cause_visible_looks_through_the_cause_chain() -> None:
    raised = RuntimeError("")
    raised.__cause__ = ConnectionRefusedError("agent-0 127.0.0.1:4000 refused")
    assert RootCauseVisible().check(observe(2, None, raised=raised)).status is Status.PASS


def test_root_cause_visible_checks_aborted_rollouts() -> None:
    good = [rollout(0, "aborted", error="HTTP 500 from agent-0: ValueError('bad')")]
    assert RootCauseVisible().check(observe(1, good)).status is Status.PASS
    for hidden in (None, "", "CancelledError"):
        bad = [rollout(0, "aborted", error=hidden)]
        assert RootCauseVisible().check(observe(1, bad)).status is Status.FAIL
    assert RootCauseVisible().check(observe(1, None)).status is Status.UNKNOWN


def test_no_empty_epoch_fails_a_returned_batch_of_only_placeholders() -> None:
    history = History()
    history.append("fault", "info", "inject", {"fault": "down", "target": "agent->resources"})
    placeholders = [rollout(i, "aborted", turns=[], error="agent->resources down") for i in range(3)]
    verdict = NoEmptyEpoch().check(observe(3, placeholders, history=history))
    assert verdict.status is Status.FAIL
    assert (
        "an empty epoch: none of 3 requested rows came back usable (3 aborted placeholders)"
        in verdict.summary
    )
    assert verdict.evidence[0] == "3x agent->resources down"
    assert "inject" in verdict.evidence[1]


def test_no_empty_epoch_passes_one_usable_row_or_a_raise() -> None:
    mixed = [rollout(0, "aborted", error="x"), rollout(1, "truncated")]
    assert NoEmptyEpoch().check(observe(2, mixed)).status is Status.PASS
    assert NoEmptyEpoch().check(observe(2, None, raised=RuntimeError("down"))).status is Status.PASS
    assert NoEmptyEpoch().check(observe(2, [])).status is Status.FAIL


def test_a_bare_cancelled_error_hides_nothing_when_the_collection_was_cancelled_from_outside() -> None:
    history = History()
    bare = observe(2, None, history=history, raised=asyncio.CancelledError())
    assert RootCauseVisible().check(bare).status is Status.FAIL
    history.append("fault", "info", "inject", {"fault": "cancel", "target": "collector", "cancelled": True})
    verdict = RootCauseVisible().check(bare)
    assert verdict.status is Status.PASS
    assert "cancelled from outside" in verdict.summary
