"""``root_cause_visible``: a raise or an aborted rollout names its root cause, and an aborted rollout's
error is held against what the History recorded as its row's failure: the HTTP status and body,
the cut connection, the client's deadline, the fault."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_rollout_chaos.history import EventKind, History
from pytest_rollout_chaos.invariants.base import Status, Verdict
from pytest_rollout_chaos.invariants.raise_has_cause import CLIENT_CLOSED
from pytest_rollout_chaos.invariants.root_cause_visible import RootCauseVisible
from tests.invariants._builders import all_ok, observe, rollout

RUN = {"link": "collector->agent:calculator_agent", "server": "calculator_agent", "row": 1}
BODY = "\"RuntimeError('tool parser crashed on row 1')\""
Record = list[tuple[str, EventKind, str, dict[str, Any]]]


def with_row_1(error: str, record: Record) -> Verdict:
    """Row 1 aborted with ``error``, its siblings completed, over a History holding ``record``."""
    history = History()
    for source, kind, op, data in record:
        history.append(source, kind, op, data)
    outcome = all_ok(3)
    outcome[1] = rollout(1, "aborted", error=error)
    return RootCauseVisible().check(observe(3, outcome, history=history))


HTTP_500: Record = [
    ("agent", "fail", "POST /run", {**RUN, "status": 500, "effect": "trajectory_exception", "body": BODY})
]
POLICY = {**RUN, "link": "model->policy", "server": "policy"}
POLICY_503: Record = [
    (
        "policy",
        "fail",
        "POST /v1/chat/completions",
        {**POLICY, "status": 503, "body": '{"error": "overloaded"}'},
    )
]
CUT: Record = [
    ("agent", "info", "POST /run", {**RUN, "error": "calculator_agent at http://x: connection reset"})
]
GAVE_UP: Record = [
    ("agent", "info", "hook", {**RUN, "effect": "hang", "rule": "r1", "route": "/run"}),
    ("agent", "info", "POST /run", {**RUN, "error": CLIENT_CLOSED}),
]
NAN: Record = [("agent", "info", "hook", {**RUN, "effect": "nan_logprobs", "rule": "r1", "changed": 1})]


@pytest.mark.parametrize(
    ("record", "error"),
    [
        (HTTP_500, "GymRequestError: calculator_agent failed: HTTP 500: RuntimeError('tool parser crashed')"),
        (HTTP_500, "the trajectory_exception fault answered for it"),
        (POLICY_503, "policy answered HTTP 503: overloaded"),
        (CUT, "ServerDisconnectedError: Server disconnected"),
        (GAVE_UP, "no /run result for row 1 within request_timeout_s=7.5"),
        (GAVE_UP, "generation failed: no answer from the policy within 7.5 s"),
        (NAN, "non-finite logprob nan at turn 0, token 3 (still after 3 attempts)"),
    ],
)
def test_an_error_that_names_the_recorded_cause_passes(record: Record, error: str) -> None:
    verdict = with_row_1(error, record)
    assert verdict.status is Status.PASS, verdict.render()
    assert "1 held against their row's recorded failure" in verdict.summary


@pytest.mark.parametrize(
    ("record", "error", "recorded"),
    [
        (HTTP_500, "row 1 aborted", "HTTP 500 (by the trajectory_exception fault) with body"),
        (HTTP_500, "HTTP 500", "tool parser crashed"),  # the status without a word of the body
        (POLICY_503, "row 1 failed with an error", "HTTP 503 with body"),
        (CUT, "row 1 aborted", "connection cut: calculator_agent at http://x: connection reset"),
        (GAVE_UP, "row 1 timed out", "no answer before the client gave up"),  # no seconds
        (NAN, "row 1 aborted after 3 attempts", "the nan_logprobs fault on calculator_agent"),
    ],
)
def test_a_generic_error_fails_with_the_recorded_cause(record: Record, error: str, recorded: str) -> None:
    verdict = with_row_1(error, record)
    assert verdict.status is Status.FAIL, verdict.render()
    assert "1 aborted rollouts do not name their root cause" in verdict.summary
    [line] = verdict.evidence
    assert line.startswith(f"row 1: error={error!r} names none of what was recorded")
    assert recorded in line


def test_only_the_rows_own_record_counts() -> None:
    other_row: Record = [(source, kind, op, {**data, "row": 2}) for source, kind, op, data in HTTP_500]
    verdict = with_row_1("row 1 aborted: the agent lost it", other_row)
    assert verdict.status is Status.PASS, verdict.render()
    assert "0 held against" in verdict.summary
    assert with_row_1("", other_row).status is Status.FAIL  # with no record, it must still name something


def test_the_gym_clients_record_of_the_row_is_a_cause() -> None:
    error = "answer cut off: ClientPayloadError: Response payload is not completed"
    failed: Record = [("collector", "fail", "run", {"row": 1, "error": error})]
    assert with_row_1("GymRequestError: answer cut off: ClientPayloadError", failed).status is Status.PASS
    assert with_row_1("row 1 aborted", failed).status is Status.FAIL


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


def test_a_bare_cancelled_error_hides_nothing_when_the_collection_was_cancelled_from_outside() -> None:
    history = History()
    bare = observe(2, None, history=history, raised=asyncio.CancelledError())
    assert RootCauseVisible().check(bare).status is Status.FAIL
    history.append("fault", "info", "inject", {"fault": "cancel", "target": "collector", "cancelled": True})
    verdict = RootCauseVisible().check(bare)
    assert verdict.status is Status.PASS
    assert "cancelled from outside" in verdict.summary


def _rows_failed(failed: int, *, also: Record | None = None) -> History:
    """A History where the first ``failed`` of four rows' ``/run`` answers came back malformed."""
    history = History()
    for row in range(failed):
        history.append("agent", "info", "hook", {**RUN, "row": row, "effect": "malformed_json", "changed": 1})
    for source, kind, op, data in also or []:
        history.append(source, kind, op, data)
    return history


COUNT_ONLY = RuntimeError("3 of 4 rollouts aborted (rows [0, 1, 2]), above max_aborted_fraction=0.5: 3x ?")
NAMED = RuntimeError(
    "3 of 4 rollouts aborted: 3x malformed /run result: result.response has no 'output' list"
)


def test_a_raise_for_failed_rows_alone_that_names_none_of_their_causes_fails() -> None:
    verdict = RootCauseVisible().check(observe(4, None, history=_rows_failed(3), raised=COUNT_ONLY))
    assert verdict.status is Status.FAIL
    assert "for its failed rows alone" in verdict.summary
    assert "row 0: the malformed_json fault on calculator_agent" in verdict.evidence


def test_a_raise_for_failed_rows_that_names_their_cause_passes() -> None:
    verdict = RootCauseVisible().check(observe(4, None, history=_rows_failed(3), raised=NAMED))
    assert verdict.status is Status.PASS, verdict.render()


def test_a_raise_with_another_batch_level_cause_need_not_name_the_rows() -> None:
    killed: Record = [("fault", "ok", "inject", {"fault": "kill", "target": "calculator_agent"})]
    verdict = RootCauseVisible().check(
        observe(4, None, history=_rows_failed(3, also=killed), raised=COUNT_ONLY)
    )
    assert verdict.status is Status.PASS, verdict.render()


def test_a_raise_with_failed_rows_under_the_bound_is_not_held_to_their_causes() -> None:
    verdict = RootCauseVisible().check(observe(4, None, history=_rows_failed(2), raised=COUNT_ONLY))
    assert verdict.status is Status.PASS, verdict.render()
