"""The body rewrites as pure functions: where logprobs and token ids are found, and how they change."""

from __future__ import annotations

import json
import math

from pytest_rollout_chaos.servers.faultlayer import rewrite


def test_token_index_picks_one_position_per_list_clamped_to_its_end() -> None:
    document = {"a": {"generation_log_probs": [-1.0, -2.0]}, "b": [{"token_logprobs": [-1.0, -2.0, -3.0]}]}
    changed = rewrite.rewrite_logprobs(document, "null", token_index=5)
    assert changed == 2
    assert document == {
        "a": {"generation_log_probs": [-1.0, None]},
        "b": [{"token_logprobs": [-1.0, -2.0, None]}],
    }


def test_lists_that_are_not_logprobs_are_left_alone() -> None:
    document = {"token_logprobs": ["x"], "content": [{"text": "hi"}], "generation_log_probs": []}
    assert rewrite.rewrite_logprobs(document, "nan", token_index=None) == 0


def test_dumps_writes_the_literals_python_json_reads_back() -> None:
    text = rewrite.dumps({"v": [math.nan, math.inf]}).decode()
    assert text == '{"v": [NaN, Infinity]}'
    assert math.isnan(json.loads(text)["v"][0])


def test_merge_shortens_and_replace_keeps_length() -> None:
    for mode, length in (("merge", 5), ("replace", 6)):
        document = {"prompt_token_ids": [1, 2, 3, 4, 5, 6]}
        assert rewrite.drift_prompt_ids(document, [], mode, None) == 1
        assert len(document["prompt_token_ids"]) == length
        assert document["prompt_token_ids"] != [1, 2, 3, 4, 5, 6]


def test_batch_size_shapes() -> None:
    assert rewrite.batch_size([1, 2, 3]) == 3
    assert rewrite.batch_size({"message_logs": [1, 2], "other": [1]}) == 2
    assert rewrite.batch_size({"x": 1, "y": [1, 2, 3, 4]}) == 4
    assert rewrite.batch_size(None) == 1


def test_malformed_bodies_do_not_parse() -> None:
    body = json.dumps({"a": {"b": [1, 2]}}).encode()
    for style in ("truncate", "garble"):
        broken = rewrite.malform(body, style)
        try:
            json.loads(broken)
        except ValueError:
            continue
        raise AssertionError(f"{style}: {broken!r} still parses")


def test_end_of_turn_replaces_every_stop_id_and_only_once_one_is_known() -> None:
    prompt = [1, 2, 9, 3, 100, 101, 9, 4, 9, 5]
    document = {"output": [{"prompt_token_ids": list(prompt)}]}
    assert rewrite.drift_prompt_ids(document, [], "end_of_turn", None) == 0, "no generation seen: no stop id"
    assert document["output"][0]["prompt_token_ids"] == prompt
    seen = [[100, 101, 9], [7, 9], [8, 3]]  # most generations stop on 9, one was cut at 3
    assert rewrite.drift_prompt_ids(document, seen, "end_of_turn", None) == 1
    assert document["output"][0]["prompt_token_ids"] == [1, 2, 10, 3, 100, 101, 10, 4, 10, 5]
    assert rewrite.drift_prompt_ids({"tokens": [1, 2, 3]}, seen, "end_of_turn", 77) == 0


def test_answer_generations_reads_one_list_per_model_call() -> None:
    run_result = {
        "_rowidx": 3,
        "response": {
            "output": [
                {"type": "function_call", "prompt_token_ids": [1], "generation_token_ids": [5, 6, 2]},
                {"type": "function_call_output", "output": "4"},
                {"type": "message", "prompt_token_ids": [1, 5], "generation_token_ids": ["7", 2]},
            ]
        },
    }
    assert rewrite.answer_generations(run_result) == [[5, 6, 2], [7, 2]]
    assert rewrite.answer_generations({"output": [{"generation_token_ids": [4, 2]}]}) == [[4, 2]]
    vllm_chat = {"choices": [{"logprobs": {"content": [{"token": "token_id:11", "logprob": -0.1}]}}]}
    assert rewrite.answer_generations(vllm_chat) == [[11]]
    both = {
        "choices": [
            {"token_ids": [11, 12], "logprobs": {"content": [{"token": "token_id:11", "logprob": 0}]}}
        ]
    }
    assert rewrite.answer_generations(both) == [[11, 12]], "one choice is one generation, read once"
    text_tokens = {"choices": [{"logprobs": {"tokens": ["a", "b"], "token_logprobs": [-1.0, -1.0]}}]}
    assert rewrite.answer_generations(text_tokens) == []
    assert rewrite.answer_generations({"tokens": [1, 2, 3]}) == []
    assert rewrite.answer_generations(None) == []


def test_answer_calls_pairs_each_generation_with_the_logprobs_it_reported() -> None:
    run_result = {
        "reward": 0.5,
        "response": {
            "output": [
                {"generation_token_ids": [5, 2], "generation_log_probs": [-0.1, float("nan")]},
                {"type": "function_call_output", "output": "4"},
                {"generation_token_ids": [7, 2]},
            ]
        },
    }
    assert rewrite.answer_calls(run_result)[0][0] == [5, 2]
    assert rewrite.answer_calls(run_result)[1] == ([7, 2], [])
    assert rewrite.answer_reward(run_result) == 0.5
    chat = {
        "choices": [{"token_ids": [11], "logprobs": {"content": [{"token": "token_id:11", "logprob": -2.0}]}}]
    }
    assert rewrite.answer_calls(chat) == [([11], [-2.0])]
    completions = {"choices": [{"token_ids": [4, 5], "logprobs": {"token_logprobs": [-1.0, None]}}]}
    assert rewrite.answer_calls(completions) == [([4, 5], [-1.0, None])]
    assert rewrite.answer_reward(chat) is None
    assert rewrite.answer_reward({"reward": True, "response": {}}) is None
    assert rewrite.answer_reward({"reward": 1.0, "error": "agent failed"}) == 1.0  # lost its response
    assert rewrite.answer_reward({"reward": 1.0, "response": "text"}) is None


def test_answer_finishes_names_why_each_choice_that_generated_stopped() -> None:
    chat = {
        "choices": [
            {"token_ids": [11, 12], "finish_reason": "length"},
            {"token_ids": [], "finish_reason": "stop"},  # generated nothing: no call, no reason
            {"token_ids": [13, 2], "finish_reason": "stop"},
            {"token_ids": [14]},
        ]
    }
    assert rewrite.answer_finishes(chat) == ["length", "stop", None]
    assert len(rewrite.answer_finishes(chat)) == len(rewrite.answer_calls(chat))
    run_result = {"reward": 1.0, "response": {"output": [{"generation_token_ids": [5, 2]}]}}
    assert rewrite.answer_finishes(run_result) == []
    assert rewrite.answer_finishes(None) == []


def test_answer_drift_names_the_model_calls_whose_prompt_does_not_extend_the_previous_one() -> None:
    def run(*calls: tuple[list[int], list[int]]) -> dict[str, object]:
        items = [
            {"prompt_token_ids": prompt, "generation_token_ids": generated} for prompt, generated in calls
        ]
        return {"reward": 1.0, "response": {"output": items}}

    kept = run(([1, 5], [7, 2]), ([1, 5, 7, 2, 9], [8, 2]), ([1, 5, 7, 2, 9, 8, 2, 4], [3]))
    assert rewrite.answer_drift(kept) == []
    drifted = run(([1, 5], [7, 2]), ([1, 5, 7, 3, 9], [8, 2]), ([1, 5, 7, 3, 9, 8, 2, 4], [3]))
    assert rewrite.answer_drift(drifted) == [1]
    assert rewrite.answer_drift(run(([1, 5], [7, 2]))) == []
    no_prompts = {"response": {"output": [{"generation_token_ids": [5, 2]}, {"generation_token_ids": [7]}]}}
    assert rewrite.answer_drift(no_prompts) == []
    assert rewrite.answer_drift({"choices": []}) == []


def test_answer_prompts_reads_what_each_model_call_was_sent_or_nothing() -> None:
    items = [
        {"type": "message"},
        {"prompt_token_ids": [1, 5], "generation_token_ids": [7, 2]},
        {"prompt_token_ids": ["token_id:1", 5, 7, 2, 9], "generation_token_ids": [8, 2]},
    ]
    assert rewrite.answer_prompts({"reward": 1.0, "response": {"output": items}}) == [[1, 5], [1, 5, 7, 2, 9]]
    assert len(rewrite.answer_prompts({"response": {"output": items}})) == len(
        rewrite.answer_calls({"response": {"output": items}})
    )
    one_unsent = [*items, {"generation_token_ids": [3]}]
    assert rewrite.answer_prompts({"response": {"output": one_unsent}}) == []
    assert rewrite.answer_prompts({"choices": []}) == []
    assert rewrite.answer_prompts(None) == []


def test_token_ids_are_ints_digit_strings_or_token_id_strings_and_nothing_else() -> None:
    def read(tokens: list[object]) -> list[list[int]]:
        content = [{"token": token, "logprob": -0.5} for token in tokens]
        return rewrite.answer_generations({"choices": [{"logprobs": {"content": content}}]})

    assert read([f"token_id:{index}" for index in range(3000)]) == [list(range(3000))]
    assert read(["token_id:11", "7"]) == [[11, 7]]
    assert read(["token_id:11", 7]) == [[11, 7]], "ints and strings together"
    for bad in ("token_id:", "x", "token_id:-1", "token_id:token_id:5", "token_id:\u00b2", " 5", True):
        assert read(["token_id:11", bad]) == [], f"{bad!r} is no token id"
    assert rewrite.answer_generations({"output": [{"generation_token_ids": [True, 1]}]}) == []
    assert rewrite.answer_generations({"output": [{"generation_token_ids": [5, 6]}]}) == [[5, 6]]


def test_answer_texts_and_last_message_read_what_a_native_collector_passes_on() -> None:
    chat = {"choices": [{"message": {"content": "abc"}}, {"message": {"content": None}}, {"text": "x"}]}
    assert rewrite.answer_texts(chat) == ["abc", None]  # a completions choice has no message
    assert rewrite.answer_texts({"output": []}) == []
    assert rewrite.answer_texts(None) == []
    asked = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "tool", "content": "4"}]}
    assert rewrite.last_message(asked) == (True, "4")
    assert rewrite.last_message({"messages": []}) == (False, None)
    assert rewrite.last_message({"prompt": "2+2?"}) == (False, None)
