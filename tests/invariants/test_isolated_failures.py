"""``isolated_failures`` on hand-built Histories: one failed trajectory takes no healthy sibling down
with it."""

from __future__ import annotations

from pytest_rollout_chaos.collector.protocol import InfrastructureError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.isolated_failures import IsolatedFailures
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
