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
