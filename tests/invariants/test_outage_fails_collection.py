"""``outage_fails_collection`` against hand-built Histories: one agent of two killed mid-collection,
judged from its exit, the connections it refused and the rows routed to it."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.invariants.base import Observation, Status
from pytest_rollout_chaos.invariants.outage_fails_collection import OutageFailsCollection
from tests.invariants._builders import Placed, rollout

_ids = itertools.count()
ROWS = 8  # rows 0-3 to calculator_agent, 4-7 to echo_agent
ECHO_ROWS = [4, 5, 6, 7]


def routed_rows() -> list[dict[str, Any]]:
    return [
        {"agent_ref": {"name": "calculator_agent" if index < 4 else "echo_agent"}, "_rowidx": index}
        for index in range(ROWS)
    ]


def run(history: Placed, row: int, began: float, ended: float | None, *, status: int | None = 200) -> None:
    """One ``/run`` as the layer records it: an answer (``status``), a cut (None), or still open."""
    agent = "calculator_agent" if row < 4 else "echo_agent"
    facts = {"link": f"collector->agent:{agent}", "server": agent, "row": row, "request_id": f"r{next(_ids)}"}
    history.at(began, "agent", "invoke", "POST /run", **facts)
    if ended is None:
        return
    if status is None:
        error = f"{agent} at http://127.0.0.1:1: ConnectionRefusedError: [Errno 111] Connect call failed"
        history.at(ended, "agent", "info", "POST /run", **facts, error=error)
    else:
        history.at(ended, "agent", "ok", "POST /run", **facts, status=status)


def echo_killed(*, restarted_at: float | None = None) -> Placed:
    """Every row sent at 0.1 s; echo_agent killed at 0.5 s, its rows refused from then on."""
    history = Placed()
    for row in range(4):
        run(history, row, 0.1, 2.0)
    for row in ECHO_ROWS:
        run(history, row, 0.1, 0.5, status=None)  # cut by the kill, then refused
        run(history, row, 1.0, 1.0, status=None)
    history.at(0.5, "process", "info", "exit", server="echo_agent", code=137, signal=9)
    if restarted_at is not None:
        history.at(restarted_at, "fault", "info", "restart", server="echo_agent")
        for row in ECHO_ROWS:
            run(history, row, restarted_at + 0.1, restarted_at + 0.5)
    return history


def observed(
    history: Placed,
    *,
    ended: float,
    rollouts: Sequence[Rollout | None] | None = None,
    raised: BaseException | None = None,
) -> Observation:
    return Observation(
        rows=routed_rows(),
        rollouts=rollouts,
        raised=raised,
        history=history,
        deadline_s=20.0,
        elapsed_s=ended,
        started_at=0.0,
        request_timeout_s=5.0,
    )


def placeholders() -> list[Rollout | None]:
    return [rollout(i) if i < 4 else rollout(i, "aborted", error="no /run result") for i in range(ROWS)]


def check(observation: Observation) -> Any:
    return OutageFailsCollection().check(observation)


def test_placeholders_for_a_dead_agents_rows_fail_whatever_their_share() -> None:
    verdict = check(observed(echo_killed(), ended=5.3, rollouts=placeholders()))
    assert verdict.status is Status.FAIL, verdict.render()
    assert "'echo_agent' went down at t=0.50s and stayed down" in verdict.summary
    assert (
        "rows [4, 5, 6, 7] (row 4: aborted; row 5: aborted; row 6: aborted; row 7: aborted)"
        in verdict.summary
    )
    assert verdict.evidence[0].startswith("echo_agent went down: ")


def test_a_raise_naming_the_server_and_its_rows_at_the_first_deadline_passes() -> None:
    error = RuntimeError("agent 'echo_agent' is gone; its rows [4, 5, 6, 7] cannot complete")
    verdict = check(observed(echo_killed(), ended=5.4, raised=error))
    assert verdict.status is Status.PASS, verdict.render()
    assert "'echo_agent' (rows [4, 5, 6, 7])" in verdict.summary


def test_a_raise_that_names_neither_fails_and_the_cause_chain_counts() -> None:
    vague = check(observed(echo_killed(), ended=5.4, raised=RuntimeError("too many rollouts aborted")))
    assert vague.status is Status.FAIL
    assert "its error does not name the server 'echo_agent' or rows 4, 5, 6, 7" in vague.summary
    wrapped = RuntimeError("collection failed")
    wrapped.__cause__ = RuntimeError("echo_agent refused rows 4, 5, 6 and 7")
    assert check(observed(echo_killed(), ended=5.4, raised=wrapped)).status is Status.PASS


def test_a_raise_after_three_deadlines_fails() -> None:
    error = RuntimeError("agent 'echo_agent' is gone; rows [4, 5, 6, 7]")
    verdict = check(observed(echo_killed(), ended=15.2, raised=error))
    assert verdict.status is Status.FAIL
    assert "10.10s after the first request deadline of its rows (t=5.10s), where 3.00s were allowed" in (
        verdict.summary
    )


def test_rows_answered_before_the_outage_are_not_lost() -> None:
    history = Placed()
    for row in range(4):
        run(history, row, 0.1, 2.0)
    run(history, 4, 0.1, 0.3)  # echo row 4 done before the kill
    for row in (5, 6, 7):
        run(history, row, 0.1, 0.5, status=None)
    history.at(0.5, "process", "info", "exit", server="echo_agent", code=137, signal=9)
    verdict = check(observed(history, ended=5.4, raised=RuntimeError("'echo_agent' gone: rows [5, 6, 7]")))
    assert verdict.status is Status.PASS, verdict.render()


def test_refused_connections_alone_are_an_outage() -> None:
    history = echo_killed()
    history.placed = [event for event in history.placed if event.source != "process"]
    verdict = check(observed(history, ended=5.3, rollouts=placeholders()))
    assert verdict.status is Status.FAIL
    assert "'echo_agent' went down at t=0.50s" in verdict.summary


def test_a_server_back_before_the_end_is_no_outage() -> None:
    verdict = check(observed(echo_killed(restarted_at=3.0), ended=6.0, rollouts=placeholders()))
    assert verdict.status is Status.NOT_JUDGED
    assert "no server a row was routed to went down and stayed down" in verdict.summary


def test_nothing_to_judge_without_an_outage_or_with_nothing_lost() -> None:
    calm = Placed()
    for row in range(ROWS):
        run(calm, row, 0.1, 1.0)
    all_done = [rollout(i) for i in range(ROWS)]
    assert check(observed(calm, ended=1.2, rollouts=all_done)).status is Status.NOT_JUDGED
    late = Placed()
    for row in range(ROWS):
        run(late, row, 0.1, 1.0)
    late.at(1.1, "process", "info", "exit", server="echo_agent", code=137, signal=9)
    verdict = check(observed(late, ended=1.2, rollouts=all_done))
    assert verdict.status is Status.NOT_JUDGED
    assert "only after every row routed there had its result" in verdict.summary


def test_never_ending_fails_and_missing_timing_is_unknown() -> None:
    never = replace(observed(echo_killed(), ended=20.0), timed_out=True)
    assert check(never).status is Status.FAIL
    assert check(replace(observed(echo_killed(), ended=5.0), started_at=None)).status is Status.UNKNOWN
