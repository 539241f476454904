"""The fault layer's record of generations: what a judge holds a collector's turns against."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pytest_rollout_chaos.faults.nan_logprobs import NanLogprobs
from pytest_rollout_chaos.faults.prefix_drift import PrefixDrift
from pytest_rollout_chaos.history import Event, fingerprint, logprob_digest
from tests.faults._applied import applied
from tests.faults._hooked import Hooked, wait_for
from tests.programs.hook_server import GENERATION, LOGPROBS


def _ended(path: str, kind: str = "ok") -> Callable[[Event], bool]:
    return lambda event: event.op == f"POST {path}" and event.kind == kind


@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["/run", "/v1/responses", "/v1/chat/completions"])
async def test_an_answer_that_generated_lists_one_fingerprint_per_model_call(
    hooked: Hooked, path: str
) -> None:
    _, history = hooked.context()
    status, _ = await hooked.post(path, {"_rowidx": 4})
    assert status == 200
    [ok] = wait_for(history, _ended(path))
    assert ok.data["generations"] == [fingerprint(GENERATION)]
    assert ok.data["logprobs"] == [logprob_digest(LOGPROBS)]
    assert ok.data["row"] == 4
    assert ok.data.get("reward") == (1.0 if path == "/run" else None), "a /run answer's reward, only"


@pytest.mark.asyncio
async def test_answers_without_generated_ids_record_none(hooked: Hooked) -> None:
    _, history = hooked.context()
    await hooked.post("/v1/completions", {})  # its logprob tokens are text, not ids
    await hooked.post("/step_batch", {"items": [1, 2]})
    events: list[Event] = wait_for(history, lambda event: event.kind == "ok" and event.op != "GET /health")
    events += wait_for(history, _ended("/step_batch"))
    assert all("generations" not in event.data for event in events)


@pytest.mark.asyncio
async def test_the_record_is_the_answer_as_it_left_the_layer(hooked: Hooked) -> None:
    ctx, history = hooked.context()
    async with applied(NanLogprobs(target="hooked", route="/run", shape="http_500"), ctx):
        status, _ = await hooked.post("/run", {"_rowidx": 1})
    assert status == 500
    [failed] = wait_for(history, _ended("/run", "fail"))
    assert "generations" not in failed.data, "a generation the client never got is no witness"


@pytest.mark.asyncio
async def test_end_of_turn_drift_leaves_no_stop_id_in_later_prompts(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    stop = GENERATION[-1]
    second_prompt = [1, 2, stop, 3, *GENERATION, 7, stop, 8]
    async with applied(PrefixDrift(target="hooked", route="/v1/responses", mode="end_of_turn"), ctx):
        await hooked.post("/v1/responses", {"prompt_len": 4})
        _, body = await hooked.post("/v1/responses", {"prompt_token_ids": second_prompt})
    drifted = json.loads(body)["output"][0]["prompt_token_ids"]
    assert stop not in drifted
    assert drifted == [stop + 1 if token == stop else token for token in second_prompt]
