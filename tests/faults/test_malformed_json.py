"""malformed_json against a real hook server: status 200, body that does not parse."""

from __future__ import annotations

import json

import pytest

from pytest_rollout_chaos.faults.malformed_json import MalformedJson
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
