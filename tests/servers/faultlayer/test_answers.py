"""What an answer says, read as pure functions: each model call's ids, logprobs, finish reason,
prompt and drift, a ``/run``'s reward, a chat answer's texts and a chat request's last message."""

from __future__ import annotations

from pytest_rollout_chaos.servers.faultlayer import answers


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
    assert answers.answer_generations(run_result) == [[5, 6, 2], [7, 2]]
    assert answers.answer_generations({"output": [{"generation_token_ids": [4, 2]}]}) == [[4, 2]]
    vllm_chat = {"choices": [{"logprobs": {"content": [{"token": "token_id:11", "logprob": -0.1}]}}]}
    assert answers.answer_generations(vllm_chat) == [[11]]
    both = {
        "choices": [
            {"token_ids": [11, 12], "logprobs": {"content": [{"token": "token_id:11", "logprob": 0}]}}
        ]
    }
    assert answers.answer_generations(both) == [[11, 12]], "one choice is one generation, read once"
    text_tokens = {"choices": [{"logprobs": {"tokens": ["a", "b"], "token_logprobs": [-1.0, -1.0]}}]}
    assert answers.answer_generations(text_tokens) == []
    assert answers.answer_generations({"tokens": [1, 2, 3]}) == []
    assert answers.answer_generations(None) == []


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
    assert answers.answer_calls(run_result)[0][0] == [5, 2]
    assert answers.answer_calls(run_result)[1] == ([7, 2], [])
    assert answers.answer_reward(run_result) == 0.5
    chat = {
        "choices": [{"token_ids": [11], "logprobs": {"content": [{"token": "token_id:11", "logprob": -2.0}]}}]
    }
    assert answers.answer_calls(chat) == [([11], [-2.0])]
    completions = {"choices": [{"token_ids": [4, 5], "logprobs": {"token_logprobs": [-1.0, None]}}]}
    assert answers.answer_calls(completions) == [([4, 5], [-1.0, None])]
    assert answers.answer_reward(chat) is None
    assert answers.answer_reward({"reward": True, "response": {}}) is None
    assert answers.answer_reward({"reward": 1.0, "error": "agent failed"}) == 1.0  # lost its response
    assert answers.answer_reward({"reward": 1.0, "response": "text"}) is None


def test_answer_finishes_names_why_each_choice_that_generated_stopped() -> None:
    chat = {
        "choices": [
            {"token_ids": [11, 12], "finish_reason": "length"},
            {"token_ids": [], "finish_reason": "stop"},  # generated nothing: no call, no reason
            {"token_ids": [13, 2], "finish_reason": "stop"},
            {"token_ids": [14]},
        ]
    }
    assert answers.answer_finishes(chat) == ["length", "stop", None]
    assert len(answers.answer_finishes(chat)) == len(answers.answer_calls(chat))
    run_result = {"reward": 1.0, "response": {"output": [{"generation_token_ids": [5, 2]}]}}
    assert answers.answer_finishes(run_result) == []
    assert answers.answer_finishes(None) == []


def test_answer_drift_names_the_model_calls_whose_prompt_does_not_extend_the_previous_one() -> None:
    def run(*calls: tuple[list[int], list[int]]) -> dict[str, object]:
        items = [
            {"prompt_token_ids": prompt, "generation_token_ids": generated} for prompt, generated in calls
        ]
        return {"reward": 1.0, "response": {"output": items}}

    kept = run(([1, 5], [7, 2]), ([1, 5, 7, 2, 9], [8, 2]), ([1, 5, 7, 2, 9, 8, 2, 4], [3]))
    assert answers.answer_drift(kept) == []
    drifted = run(([1, 5], [7, 2]), ([1, 5, 7, 3, 9], [8, 2]), ([1, 5, 7, 3, 9, 8, 2, 4], [3]))
    assert answers.answer_drift(drifted) == [1]
    assert answers.answer_drift(run(([1, 5], [7, 2]))) == []
    no_prompts = {"response": {"output": [{"generation_token_ids": [5, 2]}, {"generation_token_ids": [7]}]}}
    assert answers.answer_drift(no_prompts) == []
    assert answers.answer_drift({"choices": []}) == []


def test_answer_prompts_reads_what_each_model_call_was_sent_or_nothing() -> None:
    items = [
        {"type": "message"},
        {"prompt_token_ids": [1, 5], "generation_token_ids": [7, 2]},
        {"prompt_token_ids": ["token_id:1", 5, 7, 2, 9], "generation_token_ids": [8, 2]},
    ]
    assert answers.answer_prompts({"reward": 1.0, "response": {"output": items}}) == [[1, 5], [1, 5, 7, 2, 9]]
    assert len(answers.answer_prompts({"response": {"output": items}})) == len(
        answers.answer_calls({"response": {"output": items}})
    )
    one_unsent = [*items, {"generation_token_ids": [3]}]
    assert answers.answer_prompts({"response": {"output": one_unsent}}) == []
    assert answers.answer_prompts({"choices": []}) == []
    assert answers.answer_prompts(None) == []


def test_token_ids_are_ints_digit_strings_or_token_id_strings_and_nothing_else() -> None:
    def read(tokens: list[object]) -> list[list[int]]:
        content = [{"token": token, "logprob": -0.5} for token in tokens]
        return answers.answer_generations({"choices": [{"logprobs": {"content": content}}]})

    assert read([f"token_id:{index}" for index in range(3000)]) == [list(range(3000))]
    assert read(["token_id:11", "7"]) == [[11, 7]]
    assert read(["token_id:11", 7]) == [[11, 7]], "ints and strings together"
    for bad in ("token_id:", "x", "token_id:-1", "token_id:token_id:5", "token_id:\u00b2", " 5", True):
        assert read(["token_id:11", bad]) == [], f"{bad!r} is no token id"
    assert answers.answer_generations({"output": [{"generation_token_ids": [True, 1]}]}) == []
    assert answers.answer_generations({"output": [{"generation_token_ids": [5, 6]}]}) == [[5, 6]]


def test_answer_texts_and_last_message_read_what_a_native_collector_passes_on() -> None:
    chat = {"choices": [{"message": {"content": "abc"}}, {"message": {"content": None}}, {"text": "x"}]}
    assert answers.answer_texts(chat) == ["abc", None]  # a completions choice has no message
    assert answers.answer_texts({"output": []}) == []
    assert answers.answer_texts(None) == []
    asked = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "tool", "content": "4"}]}
    assert answers.last_message(asked) == (True, "4")
    assert answers.last_message({"messages": []}) == (False, None)
    assert answers.last_message({"prompt": "2+2?"}) == (False, None)
