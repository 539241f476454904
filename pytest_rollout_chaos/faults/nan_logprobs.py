"""Semantic fault: logprobs come back NaN, null or Infinity, or the call fails like vLLM's 500.

The shapes follow what trainers met upstream: a NaN literal in the JSON (NeMo RL #1885), a
``null`` (TRL #6166), or vLLM's HTTP 500 when it cannot encode a NaN (NeMo RL #2962).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pytest_rollout_chaos.faults._layer_fault import LayerFault
from pytest_rollout_chaos.faults.base import FaultContext, param


@dataclass(frozen=True, slots=True)
class NanLogprobs(LayerFault):
    """Rewrite logprob values in matching responses (chat, completions, Gym output items)."""

    kind: ClassVar[str] = "nan_logprobs"

    shape: Literal["nan", "null", "inf", "http_500"] = field(
        default="nan", metadata=param("how the bad value appears")
    )
    token_index: int | None = field(
        default=None, metadata=param("only this position of each logprob list; empty = all", minimum=0)
    )

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        return await self.arm(ctx, "nan_logprobs", shape=self.shape, token_index=self.token_index)
