"""``status_recorded`` against hand-built Histories holding the policy's answers as the fault layer
records them: a rollout's status held against why the policy stopped its last generation."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pytest_rollout_chaos.collector.protocol import RolloutStatus, Turn
from pytest_rollout_chaos.history import History, fingerprint
from pytest_rollout_chaos.invariants.base import Status, Verdict
from pytest_rollout_chaos.invariants.status_recorded import StatusRecorded
from tests.invariants._builders import observe, rollout

GYM_LINK = "model->policy"
NATIVE_LINK = "collector->policy"
FIRST, CUT, ENDED = [7, 8, 2], [12, 13, 14, 15], [12, 2]


def policy_answered(history: History, generated: Sequence[int], finish: str, *, link: str) -> None:
    """One chat completion as the layer records it: the generation's fingerprint and finish reason."""
    facts = {"link": link, "server": "policy"}
    history.append("policy", "invoke", "POST /v1/chat/completions", facts)
    data = {**facts, "status": 200, "generations": [fingerprint(generated)], "finishes": [finish]}
    history.append("policy", "ok", "POST /v1/chat/completions", data)


def two_turns(last: list[int]) -> list[Turn]:
    return [Turn([1, 5], FIRST, [-0.1] * 3), Turn([1, 5, *FIRST, 11], last, [-0.2] * len(last))]


def judged(statuses: Sequence[RolloutStatus], *, link: str = GYM_LINK) -> Verdict:
    """Row 0 ends on a generation cut at the limit, row 1 on one that stopped on its own."""
    history = History()
    policy_answered(history, FIRST, "stop", link=link)
    policy_answered(history, CUT, "length", link=link)
    policy_answered(history, ENDED, "stop", link=link)
    outcome = [rollout(0, statuses[0], turns=two_turns(CUT)), rollout(1, statuses[1], turns=two_turns(ENDED))]
    return StatusRecorded().check(observe(2, outcome, history=history))


@pytest.mark.parametrize("link", [GYM_LINK, NATIVE_LINK])
def test_statuses_that_follow_the_policys_finish_reason_pass(link: str) -> None:
    verdict = judged(["truncated", "completed"], link=link)
    assert verdict.status is Status.PASS, verdict.render()
    assert "2 rollouts" in verdict.summary
    assert "1 cut at the token limit" in verdict.summary


@pytest.mark.parametrize("link", [GYM_LINK, NATIVE_LINK])
def test_a_rollout_cut_at_the_token_limit_handed_back_completed_fails(link: str) -> None:
    verdict = judged(["completed", "completed"], link=link)
    assert verdict.status is Status.FAIL, verdict.render()
    assert "1 rollouts cut at the token limit were handed back as completed" in verdict.summary
    [line] = verdict.evidence
    assert line.startswith("row 0: the collector says completed")
    assert "'length'" in line


def test_a_turn_limit_may_truncate_a_rollout_whose_last_generation_stopped_on_its_own() -> None:
    assert judged(["truncated", "truncated"]).status is Status.PASS


def test_without_the_policys_finish_reasons_it_is_not_judged() -> None:
    history = History()
    history.append("policy", "ok", "POST /v1/chat/completions", {"link": GYM_LINK, "generations": ["x"]})
    outcome = [rollout(0, turns=two_turns(CUT))]
    verdict = StatusRecorded().check(observe(1, outcome, history=history))
    assert verdict.status is Status.NOT_JUDGED
    assert "no finish reason" in verdict.summary


def test_a_last_generation_not_in_the_record_or_with_two_reasons_is_not_judged() -> None:
    history = History()
    policy_answered(history, CUT, "length", link=GYM_LINK)
    policy_answered(history, CUT, "stop", link=GYM_LINK)
    outcome = [rollout(0, turns=two_turns(CUT)), rollout(1, turns=two_turns([99]))]
    verdict = StatusRecorded().check(observe(2, outcome, history=history))
    assert verdict.status is Status.NOT_JUDGED
    assert "none of 2 rollouts" in verdict.summary


def test_aborted_rollouts_and_a_raise_claim_no_status() -> None:
    history = History()
    policy_answered(history, CUT, "length", link=GYM_LINK)
    aborted = [rollout(0, "aborted", turns=two_turns(CUT), error="HTTP 500")]
    assert StatusRecorded().check(observe(1, aborted, history=history)).status is Status.NOT_JUDGED
    raised = observe(1, None, history=history, raised=RuntimeError("policy down"))
    assert StatusRecorded().check(raised).status is Status.PASS
