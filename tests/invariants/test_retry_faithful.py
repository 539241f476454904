"""``retry_faithful`` against hand-built Histories holding the fault layer's record of what each
request asked for (written by the layer's own ``asked``): a retry asks for the sampling parameters
and the prompt of the attempt it replaces; with no retry there is nothing to judge."""

from __future__ import annotations

import copy
from typing import Any

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status, Verdict
from pytest_rollout_chaos.invariants.retry_faithful import RetryFaithful
from tests.invariants._builders import observe, rollout
from tests.invariants._records import CHAT, LINK, chat, sent


def row(index: int, **sampling: Any) -> dict[str, Any]:
    """A calculator row as the engine hands it over, with its own sampling parameters."""
    return {
        "responses_create_params": {
            "input": [{"role": "user", "content": f"What is {index} + 2?"}],
            "tools": [{"type": "function", "name": "calculator", "parameters": {"type": "object"}}],
            **sampling,
        },
        "agent_ref": {"name": "calculator_agent"},
        "_rowidx": index,
    }


def judged(history: History) -> Verdict:
    return RetryFaithful().check(observe(2, [rollout(0), rollout(1, attempts=2)], history=history))


def test_a_retry_that_asks_for_the_same_sample_passes() -> None:
    history = History()
    sent(history, row(0, temperature=1.0, max_output_tokens=64))
    sent(history, row(1, temperature=1.0, max_output_tokens=64))
    sent(history, row(1, temperature=1.0, max_output_tokens=64))  # the NaN row, retried
    result = judged(history)
    assert result.status is Status.PASS, result.render()
    assert "1 retried /runs (rows [1])" in result.summary


def test_a_retry_sampled_hotter_fails_naming_the_row_and_the_parameter() -> None:
    history = History()
    sent(history, row(1, temperature=1.0))
    sent(history, row(1, temperature=1.3))
    result = judged(history)
    assert result.status is Status.FAIL, result.render()
    assert result.evidence == ("row 1: attempt 2's /run against attempt 1's: temperature 1.0 -> 1.3",)
    assert "asked for another sample than the attempt they replaced" in result.summary


def test_a_retry_that_drops_the_token_limit_fails() -> None:
    history = History()
    sent(history, row(1, max_output_tokens=64))
    sent(history, row(1))
    [problem] = judged(history).evidence
    assert "max_output_tokens 64 -> not sent" in problem


def test_a_retry_that_rebuilds_the_prompt_without_its_tools_fails() -> None:
    history = History()
    first = row(1)
    retry = copy.deepcopy(first)
    del retry["responses_create_params"]["tools"]
    sent(history, first)
    sent(history, retry)
    result = judged(history)
    assert result.status is Status.FAIL
    [problem] = result.evidence
    assert problem.startswith("row 1: attempt 2's /run against attempt 1's: prompt tools '1:"), problem
    assert "-> not sent" in problem


def test_a_retry_with_another_prompt_fails() -> None:
    history = History()
    first = row(1)
    retry = copy.deepcopy(first)
    retry["responses_create_params"]["input"].insert(0, {"role": "system", "content": "Answer briefly."})
    sent(history, first)
    sent(history, retry)
    [problem] = judged(history).evidence
    assert "prompt input '1:" in problem
    assert "-> '2:" in problem  # one message, then two


def test_each_retry_is_held_against_the_one_it_replaces() -> None:
    history = History()
    sent(history, row(1, temperature=1.0))
    sent(history, row(1, temperature=1.0))
    sent(history, row(1, temperature=0.0))
    assert judged(history).evidence == (
        "row 1: attempt 3's /run against attempt 2's: temperature 1.0 -> 0.0",
    )


def test_key_order_and_other_row_fields_do_not_count() -> None:
    history = History()
    first = row(1, temperature=1.0)
    retry = {key: first[key] for key in reversed(list(first))}  # another order, the same request
    retry["responses_create_params"] = dict(reversed(list(first["responses_create_params"].items())))
    retry["attempt_note"] = "second try"  # not a sampling parameter, not the prompt
    sent(history, first)
    sent(history, retry)
    assert judged(history).status is Status.PASS


def test_a_seed_changed_for_a_new_draw_is_still_faithful() -> None:
    history = History()
    sent(history, row(1, temperature=1.0, seed=7))
    sent(history, row(1, temperature=1.0, seed=8))
    assert judged(history).status is Status.PASS


def test_no_retry_is_not_judged_never_a_pass() -> None:
    history = History()
    sent(history, row(0, temperature=1.0))
    sent(history, row(1, temperature=1.3))  # another row: no retry of anything
    result = judged(history)
    assert result.status is Status.NOT_JUDGED, result.render()
    assert "no retry to judge" in result.summary
    assert RetryFaithful().check(observe(2, [rollout(0), rollout(1)])).status is Status.NOT_JUDGED


def test_only_the_transports_resend_of_a_cut_run_is_no_retry_to_judge() -> None:
    history = History()
    sent(history, row(1, temperature=1.0), status=None)  # cut: NeMo Gym's transport resends it
    sent(history, row(1, temperature=1.0))
    assert judged(history).status is Status.NOT_JUDGED


def test_a_resend_that_changed_what_it_asked_for_still_fails() -> None:
    history = History()
    sent(history, row(1, temperature=1.0), status=None)
    sent(history, row(1, temperature=0.5))  # no transport changes a body: the collector sent this
    assert judged(history).status is Status.FAIL


def test_a_request_recorded_without_what_it_asked_for_is_left_out() -> None:
    history = History()
    facts = {"link": LINK, "server": "agent:calculator_agent", "row": 1}
    for rid in ("a", "b"):  # a record from before the layer wrote what a request asks for
        history.append("agent", "invoke", "POST /run", facts, request_id=rid)
        history.append("agent", "ok", "POST /run", {**facts, "status": 200}, request_id=rid)
    assert judged(history).status is Status.NOT_JUDGED


def test_native_the_next_turn_is_no_retry_and_a_retry_of_a_turn_is_judged() -> None:
    history = History()
    link = "collector->policy"
    sent(history, chat(1, 0, temperature=1.0), op=CHAT, link=link)
    sent(history, chat(1, 1, temperature=1.0), op=CHAT, link=link)  # the next turn: more messages
    assert judged(history).status is Status.NOT_JUDGED
    sent(history, chat(1, 1, temperature=1.0), op=CHAT, link=link)  # turn 1 retried as it was
    result = judged(history)
    assert result.status is Status.PASS, result.render()
    assert "1 retried model calls" in result.summary
    sent(history, chat(1, 1, temperature=1.0, max_tokens=16), op=CHAT, link=link)
    assert judged(history).evidence == (
        "row 1, turn 1: attempt 3's model call against attempt 2's: max_tokens 64 -> 16",
    )


def test_in_gym_style_the_agents_own_model_calls_are_not_the_collectors() -> None:
    history = History()
    sent(history, row(1, temperature=1.0))
    for temperature in (1.0, 0.2):  # the agent's model client retrying on its own, not the collector
        sent(history, chat(1, 0, temperature=temperature), op=CHAT, link="agent->model")
    assert judged(history).status is Status.NOT_JUDGED
