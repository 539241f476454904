"""Semantic fault: a 200 answer whose JSON body is truncated or garbled."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pytest_rollout_chaos.faults._layer_fault import LayerFault
from pytest_rollout_chaos.faults.base import FaultContext, param


@dataclass(frozen=True, slots=True)
class MalformedJson(LayerFault):
    """The handler answers, then the body is cut in half or garbled; the status stays 200."""

    kind: ClassVar[str] = "malformed_json"

    style: Literal["truncate", "garble"] = field(default="truncate", metadata=param("how the body breaks"))

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        return await self.arm(ctx, "malformed_json", style=self.style)
