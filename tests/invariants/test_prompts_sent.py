"""``prompts_sent`` against hand-built Histories holding the fault layer's record of ``/run`` answers:
each turn's prompt ids held, id for id, against what the policy was sent, or against the splice the
judge rebuilds where the sent prompts drifted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_rollout_chaos.collector.protocol import Turn
from pytest_rollout_chaos.history import History, fingerprint, logprob_digest
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.prompts_sent import PromptsSent
from pytest_rollout_chaos.servers.faultlayer import answers
from tests.invariants._builders import observe, rollout, turns

LINK = "collector->agent:calculator_agent"


def run_sent(history: History, row: int, sent: Sequence[Turn], *, recorded_ids: bool = True) -> None:
    """What the layer writes for one ``/run`` whose model calls were sent ``sent``'s prompts: a
    fingerprint each, and where one drifted, the drift and every prompt in full."""
    facts = {"link": LINK, "server": "calculator_agent", "row": row}
    history.append("agent", "invoke", "POST /run", facts)
    document = {
        "reward": 1.0,
        "response": {
            "output": [
                {"prompt_token_ids": turn.prompt_token_ids, "generation_token_ids": turn.generation_token_ids}
                for turn in sent
            ]
        },
    }
    data = {
        **facts,
        "status": 200,
        "generations": [fingerprint(turn.generation_token_ids) for turn in sent],
        "logprobs": [logprob_digest(turn.generation_log_probs) for turn in sent],
        "reward": 1.0,
        "prompts": [fingerprint(ids) for ids in answers.answer_prompts(document)],
    }
    drifted = answers.answer_drift(document)
    if drifted:
        data["drifted"] = drifted
        if recorded_ids:
            data["prompt_ids"] = answers.answer_prompts(document)
    history.append("agent", "ok", "POST /run", data)


def with_prompt(given: Sequence[Turn], index: int, prompt: list[int]) -> list[Turn]:
    return [replace(turn, prompt_token_ids=prompt) if at == index else turn for at, turn in enumerate(given)]


def judged(history: History, *handed: list[Turn]) -> tuple[Status, str, tuple[str, ...]]:
    found = PromptsSent().check(
        observe(len(handed), [rollout(row, turns=given) for row, given in enumerate(handed)], history=history)
    )
    return found.status, found.summary, found.evidence


def test_prompts_as_the_policy_was_sent_them_pass() -> None:
    history = History()
    run_sent(history, 0, turns())
    run_sent(history, 1, turns())
    status, summary, _ = judged(history, turns(), turns())
    assert status is Status.PASS, summary
    assert "2 of 2 rollouts" in summary


def test_a_prompt_that_starts_right_but_was_never_sent_fails_with_the_row_and_turn() -> None:
    history = History()
    run_sent(history, 0, turns())
    doubled = with_prompt(turns(), 1, [1, 5, 6, 7, 8, 2, 2, 11])  # the EOS doubled after the prefix
    status, _, evidence = judged(history, doubled)
    assert status is Status.FAIL
    assert evidence[0].startswith("row 0: turn 1 hands on a prompt of 8 ids")
    assert "where the policy was sent 7 ids" in evidence[0]


def test_after_drift_the_splice_rebuilt_from_the_record_passes_and_nothing_else_does() -> None:
    history = History()
    run_sent(history, 0, turns(drift=True))
    status, summary, _ = judged(history, turns())  # [1,5,6,7,8,2] + the drifted prompt's [11]
    assert status is Status.PASS, summary
    for handed in (
        turns(drift=True),  # the drifted prompt passed through
        with_prompt(turns(), 1, [1, 5, 6, 7, 8, 2, 2, 11]),  # the EOS doubled at the splice
        with_prompt(turns(), 1, [1, 5, 6, 7, 8, 2, 11, 11]),  # a tail padded
    ):
        status, _, evidence = judged(history, handed)
        assert status is Status.FAIL, handed
        assert "the splice rebuilt from the drifted prompt the policy was sent 7 ids" in evidence[0]


def test_a_later_turn_after_a_splice_is_held_to_the_repaired_history() -> None:
    first = Turn([1, 5, 6], [7, 8, 2], [-0.1, -0.2, -0.3])
    sent = [
        first,
        Turn([1, 5, 6, 7, 9, 2, 11], [12, 2], [-0.5, -0.6]),
        Turn([1, 5, 6, 7, 9, 2, 11, 12, 2, 13], [14], [-0.7]),
    ]
    history = History()
    run_sent(history, 0, sent)
    repaired = [
        first,
        replace(sent[1], prompt_token_ids=[1, 5, 6, 7, 8, 2, 11]),
        replace(sent[2], prompt_token_ids=[1, 5, 6, 7, 8, 2, 11, 12, 2, 13]),
    ]
    assert judged(history, repaired)[0] is Status.PASS
    assert judged(history, with_prompt(repaired, 2, sent[2].prompt_token_ids))[0] is Status.FAIL


def test_a_rollout_handed_on_from_drift_no_splice_repairs_fails() -> None:
    sent = with_prompt(turns(), 1, [1, 5, 6, 7, 8, 9, 11])  # the end of turn re-rendered away
    history = History()
    run_sent(history, 0, sent)
    status, _, evidence = judged(history, sent)
    assert status is Status.FAIL
    assert "no end of turn left to splice at" in evidence[0]


def test_nothing_to_hold_prompts_against_is_not_judged() -> None:
    assert PromptsSent().check(observe(1, [rollout(0)])).status is Status.NOT_JUDGED  # no record
    history = History()
    run_sent(history, 0, turns())
    assert judged(history, turns()[:1])[0] is Status.NOT_JUDGED  # turns no answer generated
    native = History()
    chat = {"link": "collector->policy", "row": 0, "status": 200}
    native.append("policy", "ok", "POST /v1/chat/completions", chat)
    status, summary, _ = judged(native, turns())
    assert status is Status.NOT_JUDGED
    assert "native style" in summary
    unrecorded = History()
    unrecorded.append("agent", "ok", "POST /run", {"link": LINK, "row": 0, "status": 200, "generations": []})
    assert judged(unrecorded, turns())[0] is Status.NOT_JUDGED
    raised = PromptsSent().check(observe(1, None, raised=RuntimeError("x")))
    assert raised.status is Status.PASS


def test_a_drifted_answer_without_its_prompts_in_full_is_held_to_what_was_sent() -> None:
    history = History()
    run_sent(history, 0, turns(drift=True), recorded_ids=False)
    assert judged(history, turns(drift=True))[0] is Status.PASS
    assert judged(history, turns())[0] is Status.FAIL


def generate_sent(history: History, row: int, sent: Sequence[Turn], *, ids: bool = True) -> None:
    """What the layer writes for a native collector asking the policy token in, token out: one
    ``/inference/v1/generate`` per turn, its ``invoke`` with the prompt ids sent (``sent_ids``)."""
    for index, turn in enumerate(sent):
        facts = {"link": "collector->policy", "server": "policy", "row": row}
        request = f"policy-{row}-{index}"
        asked = {"sent_ids": fingerprint(turn.prompt_token_ids)} if ids else {}
        history.append(
            "policy", "invoke", "POST /inference/v1/generate", {**facts, **asked}, request_id=request
        )
        answered = {**facts, "status": 200, "generations": [fingerprint(turn.generation_token_ids)]}
        history.append("policy", "ok", "POST /inference/v1/generate", answered, request_id=request)


def test_a_token_in_collectors_turns_are_held_to_the_prompt_ids_each_model_call_was_sent() -> None:
    history = History()
    generate_sent(history, 0, turns())
    status, summary, _ = judged(history, turns())
    assert status is Status.PASS, summary
    doubled = with_prompt(turns(), 1, [1, 5, 6, 7, 8, 2, 2, 11])  # the EOS doubled after the prefix
    status, _, evidence = judged(history, doubled)
    assert status is Status.FAIL
    assert evidence[0].startswith("row 0: turn 1 hands on a prompt of 8 ids"), evidence
    assert "where the model call that generated it was sent 7 ids" in evidence[0]


def test_a_native_collector_whose_calls_sent_no_token_ids_is_not_judged() -> None:
    history = History()
    generate_sent(history, 0, turns(), ids=False)
    status, summary, _ = judged(history, turns())
    assert status is Status.NOT_JUDGED
    assert "native style: the collector sends the policy messages, not ids" in summary
