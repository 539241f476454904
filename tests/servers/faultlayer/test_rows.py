"""Fault-layer row attribution (``rows.RowIndex``): which row a request belongs to, if it can tell."""

from __future__ import annotations

from typing import Any

from pytest_rollout_chaos.servers.faultlayer.rows import RowIndex

ADD = "What is seventeen plus twenty-five?"
PRIMES = "Name three prime numbers below twenty."


def _row(index: int, prompt: str | list[dict[str, Any]]) -> dict[str, Any]:
    """A NeMo Gym row: a system message, then the user's prompt (a string or text parts)."""
    messages = [{"role": "system", "content": "You are a careful assistant."}]
    return {
        "_rowidx": index,
        "responses_create_params": {"input": [*messages, {"role": "user", "content": prompt}]},
    }


def _chat(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": role, "content": text} for role, text in turns]}


def _answer(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}


def _index(*rows: dict[str, Any]) -> RowIndex:
    index = RowIndex()
    for row in rows:
        assert index.register(row), row
    return index


def test_rowidx_in_the_body_wins_over_cookie_and_prompt() -> None:
    index = _index(_row(0, ADD))
    index.learn_answer(0, None, ["session_id=s0; Path=/"])
    request = {"_rowidx": 3, **_chat(("user", ADD))}
    assert index.row_of(request, "session_id=s0") == 3
    assert index.row_of({"_rowidx": True, **_chat(("user", ADD))}, None) == 0, "a bool is not a row"


def test_a_request_carrying_rowidx_and_its_input_teaches_the_row() -> None:
    index = RowIndex()
    assert index.row_of({"x": ADD}, None) is None
    assert index.row_of({**_row(5, ADD), "temperature": 1.0}, None) == 5
    assert index.row_of(_chat(("user", ADD)), None) == 5


def test_prompt_found_in_chat_messages() -> None:
    index = _index(_row(0, ADD), _row(1, PRIMES))
    system = ("system", "You are a careful assistant.")
    assert index.row_of(_chat(system, ("user", PRIMES)), None) == 1
    assert index.row_of(_chat(system, ("user", ADD)), None) == 0
    assert index.row_of(_chat(system, ("user", "Something else entirely.")), None) is None
    assert index.row_of(None, None) is None


def test_prompt_found_in_responses_input_string_and_text_parts() -> None:
    plain = {"_rowidx": 2, "responses_create_params": {"input": "Summarise the plot of Hamlet."}}
    index = _index(_row(0, ADD), _row(1, PRIMES), plain)
    assert index.row_of(_chat(("user", "Summarise the plot of Hamlet.")), None) == 2
    assert index.row_of({"model": "m", "input": f"  {PRIMES}\n"}, None) == 1
    parts = [{"type": "input_text", "text": ADD}]
    assert index.row_of({"input": [{"role": "user", "content": parts}]}, None) == 0


def test_a_prompt_split_over_text_parts_is_found_joined() -> None:
    split = [{"type": "input_text", "text": "Name three prime "}, {"type": "input_text", "text": "numbers."}]
    index = _index(_row(2, split))
    assert index.row_of({"input": [{"role": "user", "content": split}]}, None) == 2


def test_prompt_found_in_a_tokenize_request() -> None:
    index = _index(_row(0, ADD), _row(1, PRIMES))
    tokenize = {"model": "m", "messages": [{"role": "user", "content": PRIMES}], "tools": []}
    assert index.row_of(tokenize, None) == 1
    assert index.row_of({"model": "m", "prompt": ADD}, None) == 0


def test_a_cookie_set_in_an_answer_ties_later_requests() -> None:
    index = RowIndex()
    assert index.row_of({"_rowidx": 4}, None) == 4
    index.learn_answer(4, {"ok": True}, ["session_id=abc123; Path=/; HttpOnly"])
    assert index.row_of({"call": "step"}, "session_id=abc123") == 4
    assert index.row_of(None, "theme=dark; session_id=abc123") == 4, "any pair of the Cookie header"
    assert index.row_of({"call": "step"}, "session_id=other") is None
    assert index.row_of({"call": "step"}, "abc123=session_id") is None


def test_a_cookie_comes_before_the_prompt() -> None:
    index = _index(_row(0, ADD))
    index.learn_answer(7, None, ["sid=seven"])
    assert index.row_of(_chat(("user", ADD)), "sid=seven") == 7


def test_rows_sharing_a_prompt_take_first_turns_in_order() -> None:
    index = _index(_row(2, ADD), _row(0, ADD), _row(1, ADD))
    first_turn = _chat(("user", ADD))
    assert [index.row_of(first_turn, None) for _ in range(4)] == [0, 1, 2, None]


def test_each_kind_of_request_counts_its_own_first_turns() -> None:
    index = _index(_row(0, ADD), _row(1, ADD))
    chat, tokenize = "model->policy /v1/chat/completions", "model->policy /tokenize"
    first_turn = _chat(("user", ADD))
    # one turn is a chat completion, then the /tokenize of the same messages
    seen = [index.row_of(first_turn, None, stream=stream) for stream in (chat, tokenize, chat, tokenize)]
    assert seen == [0, 0, 1, 1]


def test_later_turns_are_told_apart_by_an_earlier_answer() -> None:
    index = _index(_row(0, ADD), _row(1, ADD), _row(2, ADD))
    first_turn = _chat(("user", ADD))
    assert [index.row_of(first_turn, None) for _ in range(2)] == [0, 1]
    answers = {0: "Seventeen plus twenty-five is 42.", 1: "Let me add: 17 + 25 = 42."}
    for row, text in answers.items():
        index.learn_answer(row, _answer(text), [])

    def second_turn(*assistant: str) -> dict[str, Any]:
        earlier = [("assistant", text) for text in assistant]
        return _chat(("user", ADD), *earlier, ("user", "Show your working please."))

    assert index.row_of(second_turn(answers[1]), None) == 1
    assert index.row_of(second_turn(answers[0]), None) == 0
    both = second_turn(answers[0], answers[1])
    assert index.row_of(both, None) is None, "a later turn is never taken for row 2's first turn"
    assert index.row_of(first_turn, None) == 2
    assert index.row_of(second_turn("An answer nobody saw before."), None) is None


def test_tool_call_arguments_and_responses_output_name_a_row_too() -> None:
    index = _index(_row(0, ADD), _row(1, ADD))
    assert [index.row_of(_chat(("user", ADD)), None) for _ in range(2)] == [0, 1]
    arguments = '{"expression": "17 + 25"}'
    call = {"function": {"name": "calc", "arguments": arguments}}
    index.learn_answer(0, {"choices": [{"message": {"content": None, "tool_calls": [call]}}]}, [])
    text = "Seventeen and twenty-five make forty-two."
    output = [{"type": "message", "content": [{"type": "output_text", "text": text}]}]
    index.learn_answer(1, {"output": output}, [])
    history = [{"role": "user", "content": ADD}, {"type": "function_call", "arguments": arguments}]
    assert index.row_of({"input": history}, None) == 0
    assert index.row_of({"input": [{"role": "user", "content": ADD}, *output]}, None) == 1


def test_an_answer_several_rows_gave_names_none_of_them() -> None:
    index = _index(_row(0, ADD), _row(1, ADD))
    assert [index.row_of(_chat(("user", ADD)), None) for _ in range(2)] == [0, 1]
    same = "Seventeen plus twenty-five is 42."  # greedy decoding: every row answers alike
    index.learn_answer(0, _answer(same), [])
    index.learn_answer(1, _answer(same), [])
    index.learn_answer(1, _answer("Then I double-checked: 42."), [])
    assert index.row_of(_chat(("user", ADD), ("assistant", same)), None) is None, "row 0 or row 1"
    own = _chat(("user", ADD), ("assistant", "Then I double-checked: 42."))
    assert index.row_of(own, None) == 1


def test_short_prompts_and_answers_are_not_used() -> None:
    index = RowIndex()
    assert not index.register(_row(0, "Add 2+3")), "seven characters could name unrelated requests"
    assert index.row_of(_chat(("user", "Add 2+3")), None) is None
    assert index.register(_row(1, "Add 12+3")), "eight characters are enough"
    assert index.row_of(_chat(("user", "Add 12+3")), None) == 1
    index = _index(_row(0, ADD), _row(1, ADD))
    assert [index.row_of(_chat(("user", ADD)), None) for _ in range(2)] == [0, 1]
    index.learn_answer(0, _answer("42"), [])
    assert index.row_of(_chat(("user", ADD), ("assistant", "42")), None) is None


def test_clear_forgets_prompts_cookies_answers_and_first_turns() -> None:
    first_turn = _chat(("user", ADD))
    earlier = "Seventeen plus twenty-five is 42."
    index = _index(_row(0, ADD), _row(1, ADD))
    assert index.row_of(first_turn, None) == 0
    index.learn_answer(1, _answer(earlier), ["sid=one"])
    index.clear()
    assert index.row_of(first_turn, None) is None
    assert index.row_of({"x": 1}, "sid=one") is None
    assert index.register(_row(0, ADD))
    assert index.register(_row(1, ADD))
    later_turn = _chat(("user", ADD), ("assistant", earlier))
    assert index.row_of(later_turn, None) == 0, "no answer names a row now, and first turns start over"
    assert index.row_of(first_turn, None) == 1


def test_a_session_header_seen_beside_a_rowidx_ties_later_token_id_requests_to_that_row() -> None:
    """SkyRL's model calls carry token ids and the trajectory's ``X-Session-ID`` only; its
    environment's ``/seed_session`` carried the same header beside ``_rowidx``."""
    index = _index(_row(0, ADD), _row(1, ADD))
    tokens = {"token_ids": [2, 335, 278], "sampling_params": {"max_tokens": 16}}
    assert index.row_of(tokens, None, session="1_0") is None, "an unknown session names no row"
    assert index.row_of({**_row(1, ADD), "task": "calculator"}, None, session="1_0") == 1
    assert index.row_of(tokens, None, session="1_0") == 1
    assert index.row_of(tokens, None, session="0_0") is None
    index.clear()
    assert index.row_of(tokens, None, session="1_0") is None
