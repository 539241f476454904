"""What the layer records a collector's request asked for: sampling parameters wherever the
request kind keeps them, a digest per prompt part that ignores key order, the turn of a chat."""

from __future__ import annotations

from pytest_rollout_chaos.history import fingerprint
from pytest_rollout_chaos.servers.faultlayer.asked import asked, digest

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


def test_a_runs_sampling_parameters_are_read_from_its_responses_create_params() -> None:
    run = {
        "_rowidx": 3,
        "responses_create_params": {"input": MESSAGES, "temperature": 0.7, "top_p": 0.9, "seed": 5},
        "agent_ref": {"name": "calculator_agent"},
    }
    facts = asked(run)
    assert facts["sampling"] == {"temperature": 0.7, "top_p": 0.9}, (
        "a seed picks a draw, not the distribution"
    )
    assert facts["prompt"] == {"input": digest(MESSAGES)}
    assert "turn" not in facts


def test_a_chat_request_records_its_turn_and_its_tools() -> None:
    messages = [*MESSAGES, {"role": "assistant", "content": "calc"}, {"role": "tool", "content": "4"}]
    tools = [{"type": "function", "function": {"name": "calculator"}}]
    facts = asked({"model": "m", "messages": messages, "tools": tools, "max_tokens": 64, "stop": ["\n"]})
    assert facts["sampling"] == {"max_tokens": 64, "stop": ["\n"]}
    assert sorted(facts["prompt"]) == ["messages", "tools"]
    assert facts["prompt"]["messages"].startswith("3:")
    assert facts["turn"] == 1


def test_a_token_in_request_reads_its_sampling_params_object() -> None:
    facts = asked({"token_ids": [1, 2, 3], "sampling_params": {"temperature": 1.0, "max_tokens": 8}})
    assert facts["sampling"] == {"temperature": 1.0, "max_tokens": 8}
    assert facts["prompt"] == {"token_ids": digest([1, 2, 3])}
    assert facts["sent_ids"] == fingerprint([1, 2, 3]), "one prompt's ids, as the History records token ids"


def test_only_one_prompts_token_ids_are_recorded_as_sent_ids() -> None:
    assert "sent_ids" not in asked({"prompt_token_ids": [[1, 2], [3]]})
    assert "sent_ids" not in asked({"messages": MESSAGES})


def test_a_digest_ignores_key_order_and_tells_contents_apart() -> None:
    assert digest({"a": 1, "b": [2, 3]}) == digest({"b": [2, 3], "a": 1})
    assert digest(MESSAGES) != digest([{"role": "user", "content": "What is 2 + 3?"}])
    assert digest("hello").startswith("5:")


def test_a_long_or_nested_parameter_is_recorded_as_a_digest() -> None:
    bias = {"50256": -100}
    facts = asked({"messages": MESSAGES, "logit_bias": bias, "stop_token_ids": list(range(40))})
    assert facts["sampling"] == {"logit_bias": digest(bias), "stop_token_ids": digest(list(range(40)))}


def test_a_body_that_is_no_object_asks_for_nothing() -> None:
    assert asked(None) == {}
    assert asked([1, 2]) == {}
