"""``raise_has_cause`` against hand-built Histories: a raise passes only with a batch-level cause
recorded at or before it; and it stands, judged on every scenario whether listed or not."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.engine.verdicts import judge
from pytest_rollout_chaos.faults import registry as fault_registry
from pytest_rollout_chaos.history import History, fingerprint, logprob_digest
from pytest_rollout_chaos.invariants import registry
from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict
from pytest_rollout_chaos.invariants.raise_has_cause import (
    CLIENT_CLOSED,
    ROW_BREAKING_EFFECTS,
    UNREACHABLE_FAULTS,
    RaiseHasCause,
)
from pytest_rollout_chaos.scenario.model import load_scenario
from pytest_rollout_chaos.servers.faultlayer import proxy
from tests.invariants._builders import Placed, all_ok, observe, rows

LINK = "collector->agent:calculator_agent"
SCENARIOS = Path(__file__).parents[2] / "scenarios"
_ids = itertools.count()


def run(
    history: Placed,
    row: int,
    *,
    began: float = 0.1,
    ended: float | None = 0.5,
    status: int = 200,
    cut: str | None = None,
    logprobs: tuple[float, ...] = (-0.1, -0.2),
    link: str = LINK,
    op: str = "POST /run",
) -> None:
    """One request as the fault layer records it: invoke, then ok/fail with ``status``, or info
    with ``cut`` (the error it ended with); still open when ``ended`` is None."""
    facts: dict[str, Any] = {"link": link, "server": "calculator_agent", "row": row}
    rid = f"r{next(_ids)}"
    history.at(began, "agent", "invoke", op, **facts, request_id=rid)
    if ended is None:
        return
    if cut is not None:
        history.at(ended, "agent", "info", op, **facts, error=cut, request_id=rid)
    elif status >= 400:
        history.at(ended, "agent", "fail", op, **facts, status=status, request_id=rid)
    else:
        answer = {"generations": [fingerprint([5, 2])], "logprobs": [logprob_digest(list(logprobs))]}
        history.at(ended, "agent", "ok", op, **facts, status=status, **answer, request_id=rid)


def answered(n: int = 4) -> Placed:
    """Every row's ``/run`` answered ok by t=0.5s."""
    history = Placed()
    for row in range(n):
        run(history, row)
    return history


def raised_at(history: History, ended: float, *, n: int = 4, **limits: Any) -> Observation:
    """The collector raised ``ended`` seconds into a collection that started at the History's start."""
    observation = observe(n, None, history=history, raised=AssertionError("Non-contiguous messages found!"))
    return replace(observation, started_at=history.t0, elapsed_s=ended, request_timeout_s=5.0, **limits)


def judged(observation: Observation) -> Verdict:
    return RaiseHasCause().check(observation)


# -- a raise with no batch-level cause fails ------------------------------------------------------


def test_raising_the_batch_on_one_drifted_row_fails_naming_the_siblings_that_answered() -> None:
    history = answered()
    history.at(
        0.4, "agent", "info", "hook", effect="prefix_drift", row=1, route="/run", link=LINK, mode="replace"
    )
    verdict = judged(raised_at(history, 0.6))
    assert verdict.status is Status.FAIL, verdict.render()
    assert "the batch failed for no batch-level cause: the collector raised AssertionError at t=0.60s" in (
        verdict.summary
    )
    assert "0 of 4 rows failed on the servers (aborted bound 0.5)" in verdict.summary
    assert "row 1: prefix_drift (replace) on /run at t=0.40s" in verdict.evidence
    assert "rows the servers answered ok before the raise: [0, 1, 2, 3]" in verdict.evidence


def test_raising_the_batch_on_one_rows_nan_logprobs_fails() -> None:
    history = Placed()
    for row in range(4):
        run(history, row, logprobs=(-0.1, float("nan")) if row == 2 else (-0.1, -0.2))
    verdict = judged(raised_at(history, 0.6))
    assert verdict.status is Status.FAIL, verdict.render()
    assert "1 of 4 rows failed on the servers" in verdict.summary
    assert "row 2 failed: POST /run answered non-finite logprobs (calculator_agent)" in verdict.evidence


def test_raising_the_batch_on_one_failed_trajectory_fails() -> None:
    history = Placed()
    for row in range(4):
        run(history, row, status=500 if row == 1 else 200)
    verdict = judged(raised_at(history, 0.6))
    assert verdict.status is Status.FAIL, verdict.render()
    assert "row 1 failed: POST /run answered HTTP 500 (calculator_agent)" in verdict.evidence
    assert "rows the servers answered ok before the raise: [0, 2, 3]" in verdict.evidence


def test_drift_splicing_repairs_is_no_failed_row_however_many_rows_drift() -> None:
    history = answered()
    for row in range(4):
        history.at(
            0.4, "model", "info", "hook", effect="prefix_drift", row=row, link="model->policy", mode="merge"
        )
    assert judged(raised_at(history, 0.6)).status is Status.FAIL


def test_an_inner_request_the_agent_recovered_from_is_no_failed_row() -> None:
    history = answered()
    for row in range(4):
        run(history, row, status=400, link="agent->resources", op="POST /calculator")
    assert judged(raised_at(history, 0.6)).status is Status.FAIL


def test_requests_the_collector_dropped_itself_are_not_cut_off_by_a_server() -> None:
    history = Placed()
    run(history, 0)
    for row in (1, 2, 3):
        run(history, row, ended=0.55, cut=CLIENT_CLOSED)
    assert judged(raised_at(history, 0.6)).status is Status.FAIL
    assert CLIENT_CLOSED == proxy.CLIENT_CLOSED  # the text the fault layer writes


def test_a_cause_recorded_after_the_raise_does_not_count() -> None:
    history = answered()
    history.at(3.0, "fault", "info", "inject", fault="kill", target="calculator_agent", took_s=0.1)
    history.at(3.1, "process", "info", "exit", server="calculator_agent", code=137)
    assert judged(raised_at(history, 0.6)).status is Status.FAIL


def test_an_inject_counts_from_when_it_began_not_when_it_returned() -> None:
    history = answered()
    history.at(3.0, "fault", "info", "inject", fault="oom", target="calculator_agent", took_s=2.8)
    verdict = judged(raised_at(history, 0.6))
    assert verdict.status is Status.PASS, verdict.render()
    assert verdict.summary.endswith("oom on calculator_agent at t=0.20s")


# -- a batch-level cause passes -------------------------------------------------------------------


def _short(history: Placed) -> None:
    history.at(0.05, "collector", "info", "short_results", rows=4, yielded=2)


def _exit(history: Placed) -> None:
    history.at(0.3, "process", "info", "exit", server="calculator_agent", code=137, signal=9)


def _loading(history: Placed) -> None:
    history.at(0.0, "process", "info", "loading", server="policy", ready_delay_s=3.0)


def _down(history: Placed) -> None:
    history.at(0.01, "fault", "info", "inject", fault="down", target="agent->resources", took_s=0.01)


def _cancel(history: Placed) -> None:
    history.at(0.5, "fault", "info", "inject", fault="cancel", target="collector", cancelled=True)


def _cut(history: Placed) -> None:
    run(history, 3, ended=0.4, cut="calculator_agent at http://127.0.0.1:1: ServerDisconnectedError")


def _most_rows_failed(history: Placed) -> None:
    for row in (0, 1, 2):
        run(history, row, status=503)


def _unrepairable_drift_in_most_rows(history: Placed) -> None:
    for row in (0, 1, 2):
        history.at(0.3, "model", "info", "hook", effect="prefix_drift", row=row, link="x", mode="end_of_turn")


def _gym_client_failed_most_rows(history: Placed) -> None:
    for row in (0, 1, 2):
        history.at(0.3, "collector", "fail", "run", row=row, status=None, error="no answer within timeout_s")


def _request_past_its_deadline(history: Placed) -> None:
    run(history, 3, began=0.1, ended=None)  # still waiting at the raise, 5.9 s later


CAUSES = {
    "short count": (_short, "short count: the Gym client yielded 2 results for 4 rows at t=0.05s"),
    "server exit": (_exit, "server calculator_agent: exit at t=0.30s"),
    "policy loading": (_loading, "server policy: loading at t=0.00s"),
    "link down": (_down, "down on agent->resources at t=0.00s"),
    "cancelled": (_cancel, "the collection was cancelled from outside at t=0.50s"),
    "cut off": (_cut, "calculator_agent cut off POST /run at t=0.40s: calculator_agent at http"),
    "failed rows": (_most_rows_failed, "3 of 4 rows failed on the servers, above max_aborted_fraction=0.5"),
    "unrepairable drift": (_unrepairable_drift_in_most_rows, "3 of 4 rows failed on the servers"),
    "gym client failures": (_gym_client_failed_most_rows, "3 of 4 rows failed on the servers"),
    "request deadline": (
        _request_past_its_deadline,
        "POST /run on collector->agent:calculator_agent (row 3)",
    ),
}


@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_a_batch_level_cause_at_or_before_the_raise_passes(cause: str) -> None:
    add, line = CAUSES[cause]
    history = Placed()
    add(history)
    ended = 6.0 if cause == "request deadline" else 0.6
    verdict = judged(raised_at(history, ended))
    assert verdict.status is Status.PASS, verdict.render()
    assert any(evidence.startswith(line) for evidence in verdict.evidence), verdict.evidence


def test_a_request_answered_within_its_deadline_is_no_cause() -> None:
    history = Placed()
    run(history, 3, began=0.1, ended=None)
    assert judged(raised_at(history, 4.0)).status is Status.FAIL  # waited 4.4 s of 5


def test_the_collection_deadline_is_a_cause_where_it_is_known() -> None:
    observation = raised_at(answered(), 18.0)
    assert judged(observation).status is Status.FAIL
    verdict = judged(replace(observation, collect_timeout_s=18.0))
    assert verdict.status is Status.PASS, verdict.render()
    assert verdict.evidence == ("the collection ran 18.00s, to collect_timeout_s=18",)


def test_nothing_raised_is_nothing_to_explain() -> None:
    verdict = judged(observe(4, all_ok(4), history=answered()))
    assert (verdict.status, verdict.summary) == (
        Status.NOT_JUDGED,
        "the collector did not raise: no cause to show",
    )


def fault_kinds(*families: str) -> set[str]:
    """The registered fault kinds of ``families``, as each fault class declares its family."""
    return {kind for kind, cls in fault_registry.FAULTS.items() if cls.family in families}


def test_its_fault_and_effect_names_are_the_scenario_formats() -> None:
    assert set(UNREACHABLE_FAULTS) <= fault_kinds("network", "process", "ray")
    assert fault_kinds("process", "ray") <= UNREACHABLE_FAULTS
    assert set(ROW_BREAKING_EFFECTS) <= fault_kinds("semantic")


# -- it stands: judged on every scenario ----------------------------------------------------------


def test_a_scenario_that_does_not_list_it_is_judged_by_it() -> None:
    scenario = load_scenario(SCENARIOS / "prefix-drift.chaos.yaml")
    assert "raise_has_cause" not in scenario.expect.invariants
    history = answered()
    result = ScenarioResult(
        scenario,
        rows(4),
        history,
        raised=AssertionError("Non-contiguous messages found!"),
        started_at=history.t0,
        elapsed_s=0.6,
    )
    judge(result)
    names = [verdict.name for verdict in result.verdicts]
    assert names == list(registry.judged(scenario.expect.invariants))
    assert names[-1] == "raise_has_cause"
    assert result.verdicts[-1].status is Status.FAIL
    assert not result.passed
