"""``quiet_after_end`` against hand-built Histories: a collection that has ended sends nothing more, by
the Gym client's record and the fault layer's."""

from __future__ import annotations

from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.quiet_after_end import QuietAfterEnd
from tests.invariants._builders import all_ok, observe
from tests.invariants._timeline import Recorded, at, request, timed


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
