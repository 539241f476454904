"""http_error against a real hook server: the chosen request gets the status, the rest do not."""

from __future__ import annotations

import json

import pytest

from pytest_rollout_chaos.faults.http_error import HttpError
from tests.faults._applied import applied
from tests.faults._hooked import Hooked, hook_hits, wait_for


@pytest.mark.asyncio
async def test_only_the_nth_matching_request_gets_the_status(hooked: Hooked) -> None:
    ctx, history = hooked.context()
    fault = HttpError(target="hooked", status=503, body="busy", route="/run", nth=2)
    async with applied(fault, ctx) as facts:
        await hooked.post("/v1/responses", {})  # another route: not a candidate
        answers = [await hooked.post("/run", {"_rowidx": row}) for row in range(3)]
    after = await hooked.post("/run", {"_rowidx": 3})
    assert [status for status, _ in answers] == [200, 503, 200]
    assert answers[1][1] == b"busy"
    assert after[0] == 200, "healing must disarm the rule"
    assert facts["rule"]
    hits = hook_hits(history, "http_error")
    assert [hit["row"] for hit in hits] == [1]
    fails = wait_for(history, lambda event: event.source == "hooked" and event.kind == "fail")
    assert [event.data.get("status") for event in fails] == [503], "the History records what clients saw"


@pytest.mark.asyncio
async def test_empty_body_answers_an_openai_style_json_error(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    async with applied(HttpError(target="hooked", status=429, route="/v1/chat/completions"), ctx):
        status, body = await hooked.post("/v1/chat/completions", {})
    assert status == 429
    assert json.loads(body)["error"]["code"] == 429


@pytest.mark.asyncio
async def test_inject_and_heal_are_recorded_with_params_and_facts(hooked: Hooked) -> None:
    ctx, history = hooked.context()
    fault = HttpError(target="hooked", status=500, route="/run", count=1)
    async with applied(fault, ctx):
        pass
    inject, heal = history.events(source="fault")
    assert (inject.op, heal.op) == ("inject", "heal")
    assert inject.kind == heal.kind == "info"
    assert inject.data["fault"] == "http_error"
    assert inject.data["target"] == "hooked"
    assert inject.data["status"] == 500
    assert inject.data["match"] == {"route": "/run", "count": 1}
    assert heal.data["status"] == 500
