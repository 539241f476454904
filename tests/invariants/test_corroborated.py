"""``corroborated`` against hand-built Histories holding the fault layer's record: a rollout the
collector calls completed is backed, row by row, by a successful ``/run`` of its row. The cases it
shares with ``turns_generated`` (the other claim on what was generated) are here too."""

from __future__ import annotations

from pytest_rollout_chaos.collector.protocol import Turn
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.corroborated import Corroborated
from pytest_rollout_chaos.invariants.turns_generated import TurnsGenerated
from tests.invariants._builders import observe, rollout
from tests.invariants._records import generated, run_generated


def test_rollouts_backed_by_their_runs_pass_both() -> None:
    observation = observe(2, [rollout(0), rollout(1)], history=generated(2))
    assert Corroborated().check(observation).status is Status.PASS
    assert TurnsGenerated().check(observation).status is Status.PASS


def test_a_failed_run_reported_completed_names_the_row_the_claim_and_the_status() -> None:
    history = generated(1)
    run_generated(history, 1, [], status=500)
    placeholder = [Turn([0], [0], [0.0])]
    result = Corroborated().check(observe(2, [rollout(0), rollout(1, turns=placeholder)], history=history))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1: the collector says completed with 1 turn, but the servers saw no successful /run for row 1: "
        "HTTP 500",
    )


def test_a_completed_rollout_without_turns_fails() -> None:
    result = Corroborated().check(observe(1, [rollout(0, turns=[])], history=generated(1)))
    assert result.status is Status.FAIL
    assert (
        "completed with 0 turns; a rollout to train on needs at least one generated turn"
        in result.evidence[0]
    )


def test_a_row_that_was_never_sent_cannot_be_completed() -> None:
    history = generated(1)
    result = Corroborated().check(observe(2, [rollout(0), rollout(1)], history=history))
    assert result.status is Status.FAIL
    assert result.evidence[0].endswith("no successful /run for row 1: no request for that row at all")


def test_aborted_rollouts_are_not_claims() -> None:
    history = History()
    run_generated(history, 0, [], status=500)
    observation = observe(1, [rollout(0, "aborted", error="HTTP 500 from the agent")], history=history)
    assert Corroborated().check(observation).status is Status.NOT_JUDGED
    assert TurnsGenerated().check(observation).status is Status.NOT_JUDGED


def test_without_a_server_record_nothing_can_be_corroborated() -> None:
    checker = Corroborated()
    assert checker.check(observe(1, [rollout(0)])).status is Status.NOT_JUDGED
    assert checker.check(observe(1, None, raised=RuntimeError("agent down"))).status is Status.PASS
