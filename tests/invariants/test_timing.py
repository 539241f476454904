"""``ends_promptly``, ``quiet_after_end`` and ``cancel_honoured`` against hand-built Histories: when the
collection ended, measured against what the servers and the Gym client recorded around it."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace

from pytest_rollout_chaos.history import Event, EventKind, History
from pytest_rollout_chaos.invariants.base import Observation, Status
from pytest_rollout_chaos.invariants.cancel_honoured import CancelHonoured
from pytest_rollout_chaos.invariants.ends_promptly import EndsPromptly
from pytest_rollout_chaos.invariants.quiet_after_end import QuietAfterEnd
from tests.invariants._builders import all_ok, observe

LINK = "collector->agent:calculator_agent"
_ids = itertools.count()


class Recorded(History):
    """A History whose events are placed at given times, as servers' events files place them."""

    def __init__(self) -> None:
        super().__init__(t0=0.0)
        self.written: list[Event] = []

    def events(
        self, *, source: str | None = None, kind: str | None = None, op: str | None = None
    ) -> list[Event]:
        return [
            event
            for event in sorted(self.written, key=lambda event: event.t)
            if (source is None or event.source == source)
            and (kind is None or event.kind == kind)
            and (op is None or event.op == op)
        ]


def at(history: History, t: float, source: str, kind: EventKind, op: str, **data: object) -> None:
    """An event at ``t`` seconds after the History's start (the layer writes its own times)."""
    assert isinstance(history, Recorded)
    request_id = data.pop("request_id", None)
    rid = str(request_id) if request_id else None
    history.written.append(Event(history.t0 + t, source, kind, op, data, rid))


def request(
    history: History, began: float, ended: float | None, *, status: int | None = 200, row: int = 0
) -> None:
    """One ``/run`` as the layer records it: invoke, then an answer (``status``) or a cut (None)."""
    rid = f"r{next(_ids)}"
    facts = {"link": LINK, "server": "calculator_agent", "row": row, "request_id": rid}
    at(history, began, "agent", "invoke", "POST /run", **facts)
    if ended is not None:
        outcome = {"status": status} if status is not None else {"error": "the client closed the connection"}
        kind: EventKind = "ok" if status is not None else "info"
        at(history, ended, "agent", kind, "POST /run", **facts, **outcome)


def timed(observation: Observation, *, ended: float, timeout_s: float = 5.0) -> Observation:
    """The collection started at the History's start and ended ``ended`` seconds later."""
    t0 = observation.history.t0
    return replace(observation, started_at=t0, elapsed_s=ended, request_timeout_s=timeout_s)


def fault(history: History, t: float, name: str, **data: object) -> None:
    at(history, t, "fault", "info", "inject", fault=name, target="agent", **data)


# -- ends_promptly ----------------------------------------------------------------------------


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
        probe = {"link": LINK, "server": "calculator_agent", "request_id": f"p{next(_ids)}"}
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


# -- quiet_after_end --------------------------------------------------------------------------


def test_nothing_sent_after_the_end_passes_and_a_transport_resend_is_not_the_collectors() -> None:
    history = Recorded()
    request(history, 0.0, 0.5, row=0)
    request(history, 0.0, 0.4, status=None, row=1)  # cut: NeMo Gym's transport resends it...
    request(history, 3.0, 3.1, status=None, row=1)  # ...after the end too
    assert (
        QuietAfterEnd().check(timed(observe(2, all_ok(2), history=history), ended=1.0)).status is Status.PASS
    )


def test_requests_started_after_the_end_fail_from_the_gym_clients_record_at_once() -> None:
    history = Recorded()
    at(history, 0.0, "collector", "invoke", "run", row=0)
    request(history, 0.0, 0.5, row=0)
    at(history, 1.05, "collector", "invoke", "run", row=2)  # the Gym client: at once, no grace
    request(history, 1.06, 1.5, row=2)  # the same /run at the layer: counted once
    at(history, 1.3, "collector", "info", "run_examples_after_close", rows=[4, 5])
    verdict = QuietAfterEnd().check(
        timed(observe(6, None, history=history, raised=RuntimeError("x")), ended=1.0)
    )
    assert verdict.status is Status.FAIL
    assert "it started 3 requests after it (rows [2, 4, 5])" in verdict.summary
    assert verdict.evidence[0].startswith("+0.05s after the end, the Gym client: ")


def test_requests_started_after_the_end_fail_from_the_layers_record_past_the_grace() -> None:
    history = Recorded()  # a collector with its own client: only the layer saw its requests
    request(history, 0.0, 0.5, row=0)
    request(history, 1.8, 2.2, row=3)
    verdict = QuietAfterEnd().check(
        timed(observe(6, None, history=history, raised=RuntimeError("x")), ended=1.0)
    )
    assert verdict.status is Status.FAIL
    assert "it started 1 requests after it (rows [3])" in verdict.summary
    assert verdict.evidence[0].startswith("+0.80s after the end, the layer: ")


def test_a_request_reaching_the_layer_just_after_the_end_was_sent_before_it() -> None:
    history = Recorded()
    request(history, 1.2, 1.6, row=0)
    assert (
        QuietAfterEnd().check(timed(observe(1, all_ok(1), history=history), ended=1.0)).status is Status.PASS
    )


# -- cancel_honoured --------------------------------------------------------------------------


def cancelled(history: History, t: float) -> None:
    at(history, t, "fault", "info", "inject", fault="cancel", target="collector", cancelled=True)


def test_a_cancel_honoured_at_once_passes() -> None:
    history = Recorded()
    request(history, 0.0, 0.3, row=0)
    cancelled(history, 0.4)
    request(history, 0.0, 0.6, row=1)  # already under way: it may finish
    observation = timed(observe(2, None, history=history, raised=asyncio.CancelledError()), ended=0.45)
    assert CancelHonoured().check(observation).status is Status.PASS


def test_a_swallowed_cancel_that_keeps_sending_fails() -> None:
    history = Recorded()
    cancelled(history, 0.4)
    at(history, 0.41, "collector", "invoke", "run", row=1)
    observation = timed(observe(2, all_ok(2), history=history), ended=1.2)
    verdict = CancelHonoured().check(observation)
    assert verdict.status is Status.FAIL
    assert "swallowed the cancellation and returned 2 rollouts" in verdict.summary
    assert "it sent 1 requests after the cancel (rows [1])" in verdict.summary


def test_a_cancel_turned_into_another_error_or_ending_late_fails() -> None:
    history = Recorded()
    cancelled(history, 0.4)
    wrapped = timed(observe(1, None, history=history, raised=RuntimeError("stopped")), ended=0.5)
    assert "not CancelledError" in CancelHonoured().check(wrapped).summary
    late = timed(observe(1, None, history=history, raised=asyncio.CancelledError()), ended=9.0)
    assert "it ended 8.60s after the cancel (allowed: 3s)" in CancelHonoured().check(late).summary


def test_without_an_outside_cancel_there_is_nothing_to_judge() -> None:
    history = Recorded()
    fault(history, 0.1, "cancel", cancelled=False)  # fired after the collection had ended
    assert CancelHonoured().check(observe(1, all_ok(1), history=history)).status is Status.NOT_JUDGED
