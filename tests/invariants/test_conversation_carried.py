"""``conversation_carried`` on hand-built Histories: what the fault layer recorded of the policy's
answers and requests, and what the environment recorded of each ``/step_batch``, held together."""

from __future__ import annotations

from pytest_rollout_chaos.history import History, text_fingerprint
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.conversation_carried import CHAT_OP, ConversationCarried
from tests.invariants._builders import all_ok, observe


def _fp(text: str) -> str:
    fingerprint = text_fingerprint(text)
    assert fingerprint is not None
    return fingerprint


def _asked(history: History, row: int, last: str) -> None:
    history.append("policy", "invoke", CHAT_OP, {"row": row, "last_message": _fp(last)})


def _answered(history: History, row: int, text: str) -> None:
    history.append("policy", "ok", CHAT_OP, {"row": row, "status": 200, "texts": [_fp(text)]})


def _stepped(
    history: History, handed: dict[int, str | None], observations: dict[int, str], ended: bool
) -> None:
    rows = list(handed)
    answers = [None if text is None else _fp(text) for text in handed.values()]
    history.append(
        "resources", "info", "step_batch", {"batch_size": len(rows), "rows": rows, "answers": answers}
    )
    data = {
        "rows": rows,
        "rewards": [0.0] * len(rows),
        "observations": [_fp(observations[row]) for row in rows],
        "terminateds": [ended] * len(rows),
    }
    history.append("resources", "ok", "step_batch_rewards", data)


def _two_turns(*, handed: str | None = "call calc", carried: str = "4") -> History:
    """Row 0 asks, answers ``call calc``; the environment answers ``4``; the next call ends with
    ``carried``, answers ``The answer is 4.``, and the environment ends the row."""
    history = History()
    _asked(history, 0, "2+2?")
    _answered(history, 0, "call calc")
    _stepped(history, {0: handed}, {0: "4"}, ended=False)
    _asked(history, 0, carried)
    _answered(history, 0, "The answer is 4.")
    _stepped(history, {0: "The answer is 4."}, {0: "correct"}, ended=True)
    return history


def _check(history: History) -> tuple[Status, str, tuple[str, ...]]:
    verdict = ConversationCarried().check(observe(1, all_ok(1), history=history))
    return verdict.status, verdict.summary, verdict.evidence


def test_a_conversation_carried_both_ways_passes() -> None:
    status, summary, _ = _check(_two_turns())
    assert status is Status.PASS, summary
    assert "3 hand-overs" in summary  # two answers to the environment, one observation to the policy


def test_an_environment_given_no_answer_fails() -> None:
    status, summary, evidence = _check(_two_turns(handed=None))
    assert status is Status.FAIL, summary
    assert "env.step was given row 0's last model turn as no assistant message at all" in evidence[0]
    assert "the policy's last answer for the row" in evidence[0]


def test_an_environment_given_an_empty_answer_fails() -> None:
    status, _, evidence = _check(_two_turns(handed=""))
    assert status is Status.FAIL
    assert "as an empty text" in evidence[0]


def test_an_observation_left_out_of_the_next_model_call_fails() -> None:
    status, summary, evidence = _check(_two_turns(carried="call calc"))
    assert status is Status.FAIL, summary
    assert "row 0's next model call ended with a text of 9 characters" in evidence[0]
    assert "the environment had answered it" in evidence[0]


def test_a_regenerated_answer_replaces_the_one_thrown_away() -> None:
    history = History()
    _asked(history, 0, "2+2?")
    _answered(history, 0, "thrown away")  # say its logprobs were NaN: the collector asks again
    _asked(history, 0, "2+2?")
    _answered(history, 0, "kept")
    _stepped(history, {0: "kept"}, {0: "correct"}, ended=True)
    assert _check(history)[0] is Status.PASS
    history.append("resources", "info", "step_batch", {"rows": [0], "answers": [_fp("thrown away")]})
    assert _check(history)[0] is Status.FAIL


def test_nothing_to_hold_together_is_not_judged() -> None:
    assert _check(History())[0] is Status.NOT_JUDGED  # gym style: no step_batch
    history = History()
    _stepped(history, {0: "call calc"}, {0: "4"}, ended=True)  # no policy answer tied to row 0
    status, summary, _ = _check(history)
    assert status is Status.NOT_JUDGED
    assert "no env.step item could be matched" in summary
