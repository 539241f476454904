"""logprob_drift against a real hook server: every response shape, finite values, only matching rows."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from pytest_rollout_chaos.faults.logprob_drift import LogprobDrift
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


@pytest.mark.asyncio
@pytest.mark.parametrize("path", sorted(PATHS))
async def test_every_logprob_drifts_by_a_finite_amount(hooked: Hooked, path: str) -> None:
    ctx, _ = hooked.context()
    _, clean = await hooked.post(path, {})
    async with applied(LogprobDrift(target="hooked", drift_nats=1.5, route=path), ctx):
        status, body = await hooked.post(path, {})
    assert status == 200
    before, after = PATHS[path](json.loads(clean)), PATHS[path](json.loads(body))
    assert after
    assert all(math.isfinite(value) for value in after), after
    assert after == pytest.approx([value - 1.5 for value in before])


@pytest.mark.asyncio
async def test_only_the_matching_row_drifts_and_the_hit_says_by_how_much(hooked: Hooked) -> None:
    ctx, history = hooked.context()
    async with applied(LogprobDrift(target="hooked", route="/run", row=2), ctx):
        _, ok_body = await hooked.post("/run", {"_rowidx": 1})
        _, drifted_body = await hooked.post("/run", {"_rowidx": 2})
    assert PATHS["/run"](json.loads(ok_body)) == [-0.5, -0.25, -0.125]
    assert PATHS["/run"](json.loads(drifted_body)) == [-1.5, -1.25, -1.125]
    hits = hook_hits(history, "logprob_drift")
    assert [(hit["row"], hit["drift_nats"], hit["changed"]) for hit in hits] == [(2, 1.0, 3)]
