"""prefix_drift against a real hook server: history tokens change, the way re-tokenization does."""

from __future__ import annotations

import json

import pytest

from pytest_rollout_chaos.faults.prefix_drift import PrefixDrift
from tests.faults._applied import applied
from tests.faults._hooked import Hooked

GENERATION = [100, 101, 102]


@pytest.mark.asyncio
async def test_drift_lands_inside_the_earlier_turns_generation(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    first_prompt = [1, 2, 3, 4]
    second_prompt = [*first_prompt, *GENERATION, 7, 8]  # append-only: turn 2 starts with turn 1
    async with applied(PrefixDrift(target="hooked", route="/v1/responses"), ctx):
        await hooked.post("/v1/responses", {"prompt_token_ids": first_prompt})
        _, body = await hooked.post("/v1/responses", {"prompt_token_ids": second_prompt})
    drifted = json.loads(body)["output"][0]["prompt_token_ids"]
    assert len(drifted) == len(second_prompt)
    changed = [index for index, (a, b) in enumerate(zip(second_prompt, drifted, strict=True)) if a != b]
    assert len(changed) == 1
    assert 4 <= changed[0] < 4 + len(GENERATION), "the drift belongs in the tokens turn 1 generated"


@pytest.mark.asyncio
async def test_merge_turns_two_ids_into_one_and_healing_stops_it(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    prompt = list(range(1, 11))
    fault = PrefixDrift(target="hooked", mode="merge", replacement_token_id=999, route="/v1/chat/completions")
    async with applied(fault, ctx):
        _, body = await hooked.post("/v1/chat/completions", {"prompt_token_ids": prompt})
    _, after = await hooked.post("/v1/chat/completions", {"prompt_token_ids": prompt})
    drifted = json.loads(body)["prompt_token_ids"]
    assert len(drifted) == len(prompt) - 1
    assert 999 in drifted
    assert json.loads(after)["prompt_token_ids"] == prompt


@pytest.mark.asyncio
async def test_turns_the_rule_skips_still_tell_it_where_history_is(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    first_prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    second_prompt = [*first_prompt, *GENERATION, 9]
    async with applied(PrefixDrift(target="hooked", route="/v1/responses", nth=2), ctx):
        _, untouched = await hooked.post("/v1/responses", {"prompt_token_ids": first_prompt})
        _, body = await hooked.post("/v1/responses", {"prompt_token_ids": second_prompt})
    assert json.loads(untouched)["output"][0]["prompt_token_ids"] == first_prompt
    drifted = json.loads(body)["output"][0]["prompt_token_ids"]
    changed = [index for index, (a, b) in enumerate(zip(second_prompt, drifted, strict=True)) if a != b]
    assert changed == [len(first_prompt) + 1], "inside turn 1's generation, not the middle of the prompt"
