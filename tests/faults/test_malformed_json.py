"""malformed_json against a real hook server: status 200, a body that does not parse, or one that
parses with every list in it emptied."""

from __future__ import annotations

import json

import pytest

from pytest_rollout_chaos.faults.malformed_json import MalformedJson
from pytest_rollout_chaos.servers.faultlayer.rewrite import empty_lists
from tests.faults._applied import applied
from tests.faults._hooked import Hooked


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
