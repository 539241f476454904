"""nan_logprobs against a real hook server: every response shape, every bad-value shape."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from pytest_rollout_chaos.faults.nan_logprobs import NanLogprobs
from tests.faults._applied import applied
from tests.faults._hooked import Hooked, hook_hits

PATHS: dict[str, Callable[[Any], list[Any]]] = {
    "/v1/chat/completions": lambda doc: [
        item["logprob"] for item in doc["choices"][0]["logprobs"]["content"]
    ],
    "/v1/completions": lambda doc: doc["choices"][0]["logprobs"]["token_logprobs"],
    "/v1/responses": lambda doc: doc["output"][0]["generation_log_probs"],
    "/run": lambda doc: doc["response"]["output"][0]["generation_log_probs"],
}


def _is_bad(shape: str, value: Any) -> bool:
    if shape == "null":
        return value is None
    if shape == "nan":
        return isinstance(value, float) and math.isnan(value)
    return bool(value == math.inf)


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", ["nan", "null", "inf"])
@pytest.mark.parametrize("path", sorted(PATHS))
async def test_every_logprob_becomes_the_bad_value(hooked: Hooked, path: str, shape: str) -> None:
    ctx, _ = hooked.context()
    async with applied(NanLogprobs(target="hooked", shape=shape, route=path), ctx):  # type: ignore[arg-type]
        status, body = await hooked.post(path, {})
    assert status == 200
    values = PATHS[path](json.loads(body))
    assert values
    assert all(_is_bad(shape, value) for value in values), values


@pytest.mark.asyncio
async def test_nan_is_the_bare_json_literal_python_emits(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    async with applied(NanLogprobs(target="hooked", shape="nan", token_index=1, route="/v1/responses"), ctx):
        _, body = await hooked.post("/v1/responses", {})
    assert b"[-0.5, NaN, -0.125]" in body, body


@pytest.mark.asyncio
async def test_http_500_fails_like_vllm_and_only_on_matching_rows(hooked: Hooked) -> None:
    ctx, history = hooked.context()
    async with applied(NanLogprobs(target="hooked", shape="http_500", route="/run", row=2), ctx):
        ok_status, ok_body = await hooked.post("/run", {"_rowidx": 1})
        bad_status, bad_body = await hooked.post("/run", {"_rowidx": 2})
    assert ok_status == 200
    assert PATHS["/run"](json.loads(ok_body)) == [-0.5, -0.25, -0.125]
    assert (bad_status, bad_body) == (500, b"Internal Server Error")
    assert [hit["row"] for hit in hook_hits(history, "nan_logprobs")] == [2]
