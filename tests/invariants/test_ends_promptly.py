"""``ends_promptly`` against hand-built Histories: the collection ends soon after its last progress,
measured against what the servers and the Gym client recorded around it."""

from __future__ import annotations

from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.ends_promptly import EndsPromptly
from tests.invariants._builders import all_ok, observe
from tests.invariants._timeline import LINK, Recorded, at, fault, request, request_ids, timed


def test_a_frozen_agent_noticed_at_the_request_deadline_passes() -> None:
    history = Recorded()
    fault(history, 0.1, "freeze")
    for row in range(4):
        request(history, 0.2, None, row=row)  # frozen: never answered
    verdict = EndsPromptly().check(
        timed(observe(4, None, history=history, raised=RuntimeError("x")), ended=5.4)
    )
    assert verdict.status is Status.PASS, verdict.render()


def test_a_frozen_agent_noticed_at_the_collection_deadline_fails() -> None:
    history = Recorded()
    fault(history, 0.1, "freeze")
    for row in range(4):
        request(history, 0.2, None, row=row)
    raised = RuntimeError("collection of 4 rows did not finish within collect_timeout_s=18")
    verdict = EndsPromptly().check(timed(observe(4, None, history=history, raised=raised), ended=18.0))
    assert verdict.status is Status.FAIL
    assert (
        "noticed late: it ended 17.80s after the last progress, where 8.00s were allowed" in verdict.summary
    )
    assert "4 requests were left without an answer" in verdict.summary
    assert verdict.evidence[0] == "last progress: the collector sending POST /run at t=0.20s"


def test_a_short_count_found_at_the_deadline_fails_with_only_the_margin_allowed() -> None:
    history = Recorded()
    fault(history, 0.0, "short_results")
    for row in range(6):
        request(history, 0.1, 0.9 + row / 10, row=row)  # every /run answered
    late = EndsPromptly().check(
        timed(observe(6, None, history=history, raised=RuntimeError("x")), ended=27.0)
    )
    assert late.status is Status.FAIL
    assert "every request was answered, so nothing was left to wait for beyond a 3.00s margin" in late.summary
    prompt = EndsPromptly().check(
        timed(observe(6, None, history=history, raised=RuntimeError("x")), ended=1.6)
    )
    assert prompt.status is Status.PASS


def test_a_collector_resending_a_timed_out_run_is_late_from_the_rows_first_request() -> None:
    history = Recorded()
    fault(history, 0.1, "freeze")
    for row in range(4):
        for sent in (0.2, 5.2, 10.2):  # given up at each deadline and sent again, none answered
            request(history, sent, None, row=row)
    raised = RuntimeError("4 of 4 rollouts aborted")
    verdict = EndsPromptly().check(timed(observe(4, None, history=history, raised=raised), ended=15.3))
    assert verdict.status is Status.FAIL, verdict.render()
    assert "it ended 15.10s after the last progress, where 8.00s were allowed" in verdict.summary
    assert verdict.evidence[0] == "last progress: the collector sending POST /run at t=0.20s"


def test_a_probe_of_a_stuck_server_is_no_progress_until_answered() -> None:
    history = Recorded()
    request(history, 0.2, None, row=0)  # frozen: never answered
    for sent in (5.2, 11.2):  # the collector asks the agent whether it is there; no answer
        probe = {"link": LINK, "server": "calculator_agent", "request_id": f"p{next(request_ids)}"}
        at(history, sent, "agent", "invoke", "GET /", **probe)
    verdict = EndsPromptly().check(
        timed(observe(1, None, history=history, raised=RuntimeError("x")), ended=12.3)
    )
    assert verdict.status is Status.FAIL, verdict.render()
    assert verdict.evidence[0] == "last progress: the collector sending POST /run at t=0.20s"


def test_a_row_sent_again_after_an_answer_waits_from_that_answer() -> None:
    history = Recorded()
    request(history, 0.0, 1.0, row=0)  # answered (bad logprobs, say), so the row is retried
    request(history, 1.0, None, row=0)  # the retry hangs
    verdict = EndsPromptly().check(
        timed(observe(1, None, history=history, raised=RuntimeError("x")), ended=6.2)
    )
    assert verdict.status is Status.PASS, verdict.render()
    assert "(an answer to POST /run on " in verdict.summary


def test_ends_promptly_measures_from_the_last_answer_and_needs_the_timing() -> None:
    history = Recorded()
    request(history, 0.0, None, row=0)  # one row hangs...
    request(history, 0.0, 9.0, row=1)  # ...while a sibling takes long
    assert (
        EndsPromptly().check(timed(observe(2, all_ok(2), history=history), ended=13.5)).status is Status.PASS
    )
    assert EndsPromptly().check(observe(2, all_ok(2), history=history)).status is Status.UNKNOWN
