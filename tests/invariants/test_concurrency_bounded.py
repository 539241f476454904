"""``concurrency_bounded``: the collector's own ``/run`` requests in flight at once, against its limit."""

from __future__ import annotations

import dataclasses

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Observation, Status
from pytest_rollout_chaos.invariants.concurrency_bounded import ConcurrencyBounded
from tests.invariants._builders import Placed, all_ok, observe

CHECK = ConcurrencyBounded()
LINK = "collector->calculator_agent"


def _limited(history: History, *, rows: int = 4, limit: int | None = 2) -> Observation:
    return dataclasses.replace(observe(rows, all_ok(rows), history=history), max_concurrency=limit)


def _begin(history: History, request: str, row: int) -> None:
    history.append("calculator_agent", "invoke", "POST /run", {"link": LINK, "row": row}, request_id=request)


def _answer(history: History, request: str, row: int, status: int = 200) -> None:
    data = {"link": LINK, "row": row, "status": status}
    history.append("calculator_agent", "ok", "POST /run", data, request_id=request)


def _cut(history: History, request: str, row: int) -> None:
    history.append("calculator_agent", "info", "POST /run", {"link": LINK, "row": row}, request_id=request)


def test_requests_that_never_overlap_beyond_the_limit_pass() -> None:
    history = History()
    _begin(history, "a", 0)
    _begin(history, "b", 1)
    _answer(history, "a", 0)
    _begin(history, "c", 2)
    _answer(history, "b", 1)
    _begin(history, "d", 3)
    _answer(history, "c", 2)
    _answer(history, "d", 3)
    verdict = CHECK.check(_limited(history))
    assert verdict.status is Status.PASS, verdict
    assert "at most 2 of 4 /run requests in flight at once (limit 2)" in verdict.summary


def test_one_request_past_the_limit_fails_and_lists_the_moment() -> None:
    history = History()
    _begin(history, "a", 0)
    _begin(history, "b", 1)
    _begin(history, "c", 1)  # a retry of row 1 sent outside the permit
    for request, row in (("a", 0), ("b", 1), ("c", 1)):
        _answer(history, request, row)
    verdict = CHECK.check(_limited(history))
    assert verdict.status is Status.FAIL
    assert (
        "3 /run requests were in flight at once, above the collector's max_concurrency=2" in verdict.summary
    )
    assert len(verdict.evidence) == 3
    assert all(LINK in line for line in verdict.evidence)


def test_a_request_cut_with_no_answer_counts_only_at_its_start_and_resends_not_at_all() -> None:
    history = History()
    _begin(history, "a", 0)
    _begin(history, "b", 1)
    _cut(history, "a", 0)  # the collector gave up on it; the layer sees the cut later
    _begin(history, "c", 2)
    _begin(history, "a2", 0)  # the transport resending the unanswered row-0 request
    for request, row in (("b", 1), ("c", 2), ("a2", 0)):
        _answer(history, request, row)
    verdict = CHECK.check(_limited(history))
    assert verdict.status is Status.PASS, verdict


def test_not_judged_without_a_declared_limit_in_native_style_or_with_no_more_rows_than_it() -> None:
    history = History()
    _begin(history, "a", 0)
    _answer(history, "a", 0)
    undeclared = CHECK.check(_limited(history, limit=None))
    assert undeclared.status is Status.NOT_JUDGED
    assert "declares no limit" in undeclared.summary
    native = CHECK.check(dataclasses.replace(_limited(history), style="native"))
    assert native.status is Status.NOT_JUDGED
    few = CHECK.check(_limited(history, rows=2, limit=2))
    assert few.status is Status.NOT_JUDGED
    assert "nothing could exceed it" in few.summary
    unseen = CHECK.check(_limited(History()))
    assert unseen.status is Status.NOT_JUDGED


def test_a_request_answered_after_the_collectors_deadline_counts_only_until_that_deadline() -> None:
    history = Placed()
    for t, request, row in ((0.0, "a", 0), (0.0, "b", 1), (5.05, "c", 2), (5.05, "d", 3)):
        history.at(t, "calculator_agent", "invoke", "POST /run", link=LINK, row=row, request_id=request)
    for request, row in (("a", 0), ("b", 1), ("c", 2), ("d", 3)):  # all answered when the fault heals
        answer = {"link": LINK, "row": row, "status": 500, "request_id": request}
        history.at(10.0, "calculator_agent", "ok", "POST /run", **answer)
    given_up = dataclasses.replace(_limited(history), request_timeout_s=5.0)
    assert CHECK.check(given_up).status is Status.PASS  # a and b were given up before c and d began
    waited = CHECK.check(dataclasses.replace(given_up, request_timeout_s=None))
    assert waited.status is Status.FAIL
    assert "4 /run requests were in flight at once" in waited.summary
