"""``logprobs_generated`` against hand-built Histories holding the fault layer's record: the logprobs a
collector hands back are the ones the model reported for the row, not zeroed, not invented."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from pytest_rollout_chaos.collector.protocol import Turn
from pytest_rollout_chaos.history import History, fingerprint, logprob_digest
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.logprobs_generated import LogprobsGenerated
from tests.invariants._builders import observe, rollout, turns
from tests.invariants._records import answered, run_answered


def zeroed(given: Sequence[Turn]) -> list[Turn]:
    """``nan_to_num``: every non-finite logprob replaced by 0.0."""
    return [
        replace(
            turn, generation_log_probs=[v if math.isfinite(v) else 0.0 for v in turn.generation_log_probs]
        )
        for turn in given
    ]


def test_logprobs_as_the_model_reported_them_pass_also_as_float32() -> None:
    history = answered(2)
    assert (
        LogprobsGenerated().check(observe(2, [rollout(0), rollout(1)], history=history)).status is Status.PASS
    )
    rounded = [replace(t, generation_log_probs=[v + 3e-8 for v in t.generation_log_probs]) for t in turns()]
    result = LogprobsGenerated().check(observe(1, [rollout(0, turns=rounded)], history=answered(1)))
    assert result.status is Status.PASS


def test_nan_logprobs_replaced_by_zero_fail_with_the_row_and_turn() -> None:
    history = History()
    run_answered(history, 0, turns(nan=True))  # what the server answered, NaN and all
    result = LogprobsGenerated().check(
        observe(1, [rollout(0, turns=zeroed(turns(nan=True)))], history=history)
    )
    assert result.status is Status.FAIL
    assert "hand back logprobs the model never reported" in result.summary
    assert result.evidence[0].startswith("row 0: turns [0] hand back logprobs ['3:-0.300000:-0.500000']")
    assert result.evidence[0].endswith("where the row's /run answered ['3:x2']")


def test_a_nan_passed_through_is_finite_logprobs_business_not_this_one() -> None:
    history = History()
    run_answered(history, 0, turns(nan=True))
    result = LogprobsGenerated().check(observe(1, [rollout(0, turns=turns(nan=True))], history=history))
    assert result.status is Status.PASS


def test_a_retry_is_judged_by_the_answer_it_took() -> None:
    history = History()
    run_answered(history, 0, turns(nan=True))
    run_answered(history, 0, turns())
    assert LogprobsGenerated().check(observe(1, [rollout(0)], history=history)).status is Status.PASS


def test_invented_logprobs_in_native_style_fail() -> None:
    history = History()
    for turn in turns():
        data = {
            "link": "collector->policy",
            "server": "policy",
            "row": 0,
            "status": 200,
            "generations": [fingerprint(turn.generation_token_ids)],
            "logprobs": [logprob_digest(turn.generation_log_probs)],
        }
        history.append("policy", "ok", "POST /v1/chat/completions", data)
    invented = [
        replace(turn, generation_log_probs=[0.0] * len(turn.generation_log_probs)) for turn in turns()
    ]
    result = LogprobsGenerated().check(observe(1, [rollout(0, turns=invented)], history=history))
    assert result.status is Status.FAIL
    assert result.evidence[0].startswith("row 0 (count:sum:weighted sum): turn 0: 3:0.000000:0.000000")


def test_without_a_record_of_logprobs_it_is_not_judged() -> None:
    assert LogprobsGenerated().check(observe(1, [rollout(0)])).status is Status.NOT_JUDGED
