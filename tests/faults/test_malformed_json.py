"""malformed_json against a real hook server: status 200, a body that does not parse, one that
parses with every list in it emptied, or one that parses with a part a reader cannot use."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from pytest_rollout_chaos.faults.malformed_json import MalformedJson
from pytest_rollout_chaos.servers.faultlayer.effects import MalformedStyle
from pytest_rollout_chaos.servers.faultlayer.rewrite import (
    drop_last_prompt_ids,
    drop_output,
    drop_response,
    empty_lists,
    shorten_logprobs,
)
from tests.faults._applied import applied
from tests.faults._hooked import Hooked, wait_for


@pytest.mark.asyncio
@pytest.mark.parametrize("style", ["truncate", "garble"])
async def test_body_no_longer_parses_but_status_is_200(hooked: Hooked, style: str) -> None:
    ctx, _ = hooked.context()
    _, intact = await hooked.post("/v1/chat/completions", {})
    async with applied(MalformedJson(target="hooked", style=style, route="/v1/chat/completions"), ctx):  # type: ignore[arg-type]
        status, body = await hooked.post("/v1/chat/completions", {})
    assert status == 200
    with pytest.raises(ValueError, match=r".+"):
        json.loads(body)
    if style == "truncate":
        assert intact.startswith(body)
        assert len(body) == len(intact) // 2


@pytest.mark.asyncio
async def test_a_cut_off_answer_sends_its_status_and_half_its_body_then_closes(hooked: Hooked) -> None:
    ctx, history = hooked.context()
    _, intact = await hooked.post("/run", {})
    cut_off = MalformedJson(target="hooked", style="cut_off", route="/run")
    async with (
        applied(cut_off, ctx),
        aiohttp.ClientSession() as session,
        session.post(f"{hooked.url}/run", json={}) as response,
    ):
        assert (response.status, response.content_length) == (200, len(intact))
        with pytest.raises(aiohttp.ClientPayloadError, match="not completed"):
            await response.read()
    [cut] = wait_for(history, lambda event: event.op == "POST /run" and event.kind == "info")
    half, whole = len(intact) // 2, len(intact)
    assert cut.data["error"] == f"answer cut off by the fault layer after {half} of {whole} bytes"


@pytest.mark.asyncio
async def test_an_emptied_body_parses_with_its_envelope_and_no_list_content(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    _, intact = await hooked.post("/v1/chat/completions", {})
    whole = json.loads(intact)
    async with applied(MalformedJson(target="hooked", style="emptied", route="/v1/chat/completions"), ctx):
        status, body = await hooked.post("/v1/chat/completions", {})
    assert status == 200
    document = json.loads(body)
    assert whole["choices"]
    assert document["choices"] == []
    assert sorted(document) == sorted(whole)


def test_empty_lists_empties_the_outermost_lists_and_counts_those_that_held_something() -> None:
    run = {"response": {"output": [{"generation_token_ids": [1, 2]}], "input": []}, "reward": 1.0}
    assert empty_lists(run) == 1
    assert run == {"response": {"output": [], "input": []}, "reward": 1.0}
    rows = [[1], [2]]
    assert empty_lists(rows) == 1
    assert rows == []


@pytest.mark.asyncio
async def test_unreadable_styles_keep_a_run_answer_parsing_with_one_part_broken(hooked: Hooked) -> None:
    ctx, history = hooked.context()
    _, intact = await hooked.post("/run", {})
    [item] = json.loads(intact)["response"]["output"]
    got = {}
    styles: tuple[MalformedStyle, ...] = ("no_output", "no_response", "no_prompt_ids", "short_logprobs")
    for style in styles:
        async with applied(MalformedJson(target="hooked", style=style, route="/run"), ctx):
            status, body = await hooked.post("/run", {})
        assert status == 200
        got[style] = json.loads(body).get("response")
    assert "output" not in got["no_output"]
    assert got["no_response"] is None
    [no_prompt] = got["no_prompt_ids"]["output"]
    assert "prompt_token_ids" not in no_prompt
    assert no_prompt["generation_token_ids"] == item["generation_token_ids"]
    [short] = got["short_logprobs"]["output"]
    assert short["generation_log_probs"] == item["generation_log_probs"][:-1]
    assert short["generation_token_ids"] == item["generation_token_ids"]
    hits = [event.data for event in history.events(op="hook") if event.data.get("effect") == "malformed_json"]
    assert [(hit.get("style"), hit.get("changed")) for hit in hits] == [
        ("no_output", 1),
        ("no_response", 1),
        ("no_prompt_ids", 1),
        ("short_logprobs", 1),
    ]


def test_drop_response_removes_the_response_object_and_keeps_the_rest() -> None:
    run = {"response": {"output": [{"generation_token_ids": [1]}]}, "reward": 0.0, "error": "agent failed"}
    assert drop_response(run) == 1
    assert run == {"reward": 0.0, "error": "agent failed"}
    assert drop_response(run) == 0
    assert drop_response([run]) == 0


def test_drop_output_removes_every_output_list_and_nothing_else() -> None:
    run = {
        "response": {"id": "r", "output": [{"generation_token_ids": [1]}]},
        "output": "text",
        "reward": 1.0,
    }
    assert drop_output(run) == 1
    assert run == {"response": {"id": "r"}, "output": "text", "reward": 1.0}
    assert drop_output(run) == 0


def test_drop_last_prompt_ids_breaks_only_the_last_model_call() -> None:
    first = {"prompt_token_ids": [1, 2], "generation_token_ids": [3], "generation_log_probs": [-0.1]}
    last = {"prompt_token_ids": [1, 2, 3, 4], "generation_token_ids": [5], "generation_log_probs": [-0.2]}
    run = {"response": {"output": [dict(first), {"type": "function_call_output"}, dict(last)]}}
    assert drop_last_prompt_ids(run) == 1
    unreadable = {"generation_token_ids": [5], "generation_log_probs": [-0.2]}
    assert run["response"]["output"] == [first, {"type": "function_call_output"}, unreadable]
    assert drop_last_prompt_ids({"prompt_token_ids": [1, 2]}) == 0  # nothing generated: left alone


def test_shorten_logprobs_drops_one_value_per_logprob_list_and_keeps_the_ids() -> None:
    chat: dict[str, Any] = {
        "choices": [
            {"token_ids": [7, 8], "logprobs": {"content": [{"token": "token_id:7", "logprob": -0.5}] * 2}},
            {"token_ids": [], "logprobs": {"token_logprobs": []}},
        ]
    }
    assert shorten_logprobs(chat) == 1
    assert chat["choices"][0]["token_ids"] == [7, 8]
    assert len(chat["choices"][0]["logprobs"]["content"]) == 1
