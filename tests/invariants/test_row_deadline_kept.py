"""``row_deadline_kept`` against hand-built Histories: each request the collector gave up on is
measured from its own send, against ``request_timeout_s`` (5 s here, a 3 s margin)."""

from __future__ import annotations

from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.row_deadline_kept import RowDeadlineKept
from tests.invariants._builders import all_ok, observe
from tests.invariants._timeline import LINK, Recorded, at, fault, request, timed

CHECK = RowDeadlineKept()


def test_a_hung_row_given_up_at_its_own_deadline_passes() -> None:
    history = Recorded()
    for row in range(3):
        request(history, 0.1, 0.5, row=row)
    request(history, 0.1, 5.1, status=None, row=3)  # hung, closed by the client at 5 s
    verdict = CHECK.check(timed(observe(4, all_ok(4), history=history), ended=5.1))
    assert verdict.status is Status.PASS, verdict.render()
    assert "1 requests given up, each after 5.00s to 5.00s of its own" in verdict.summary


def test_a_queued_row_cut_by_a_deadline_counted_from_collect_fails_naming_it() -> None:
    history = Recorded()
    request(history, 0.1, 5.1, status=None, row=0)  # the hung one, at its deadline
    request(history, 5.1, 5.2, status=None, row=1)  # queued behind it: 0.1 s left, cut
    request(history, 5.2, 5.6, row=2)
    verdict = CHECK.check(timed(observe(3, all_ok(3), history=history), ended=5.7))
    assert verdict.status is Status.FAIL
    assert "1 requests were given up before their own request_timeout_s=5 (the shortest after 0.10s)" in (
        verdict.summary
    )
    assert verdict.evidence == (f"row 1: POST /run on {LINK} sent at t=5.10s, given up at t=5.20s (0.10s)",)


def test_a_row_held_past_its_deadline_and_margin_fails() -> None:
    history = Recorded()
    request(history, 0.1, 12.1, status=None, row=0)  # given up after 12 s, with 8 s allowed
    request(history, 0.1, 0.4, row=1)
    verdict = CHECK.check(timed(observe(2, all_ok(2), history=history), ended=12.2))
    assert verdict.status is Status.FAIL
    assert "held past request_timeout_s=5 plus a 3.00s margin (the longest 12.00s)" in verdict.summary


def test_a_resend_after_a_cut_goes_on_with_the_first_send() -> None:
    history = Recorded()
    facts = {"link": LINK, "server": "calculator_agent", "row": 0}
    at(history, 0.1, "agent", "invoke", "POST /run", request_id="c1", **facts)
    at(history, 1.0, "agent", "info", "POST /run", request_id="c1", error="reset by peer", **facts)
    request(history, 1.5, 5.1, status=None, row=0)  # the transport's resend, closed at 5 s of the row
    verdict = CHECK.check(timed(observe(1, all_ok(1), history=history), ended=5.2))
    assert verdict.status is Status.PASS, verdict.render()


def test_closes_the_network_or_the_collections_end_made_are_not_the_collectors() -> None:
    cut = Recorded()
    fault(cut, 0.0, "timeout", proxy="collector_to_agent", toxic="t1")
    request(cut, 0.1, 0.4, status=None, row=0)  # Toxiproxy's timeout toxic closed it
    assert CHECK.check(timed(observe(1, all_ok(1), history=cut), ended=0.5)).status is Status.NOT_JUDGED
    raised = Recorded()
    request(raised, 0.1, 1.0, status=None, row=0)  # closed as the collection failed fast
    failed = observe(1, None, history=raised, raised=RuntimeError("agent gone"))
    assert CHECK.check(timed(failed, ended=1.1)).status is Status.NOT_JUDGED
    answered = Recorded()
    request(answered, 0.1, 0.5, row=0)
    verdict = CHECK.check(timed(observe(1, all_ok(1), history=answered), ended=0.6))
    assert verdict.status is Status.NOT_JUDGED
    assert verdict.summary == "the collector gave up on no request of its own accord"


def test_rows_left_running_after_a_returned_collection_are_the_harnesss_to_close() -> None:
    history = Recorded()
    for row in range(4):
        request(history, 0.1, 0.5, row=row)
    for row in (4, 5):  # a short count: never awaited, closed when the harness closed the client
        request(history, 0.1, 0.7, status=None, row=row)
    verdict = CHECK.check(timed(observe(6, all_ok(4), history=history), ended=0.6))
    assert verdict.status is Status.NOT_JUDGED, verdict.render()
