"""Semantic fault: matching requests get an HTTP error status instead of an answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault
from pytest_rollout_chaos.faults.base import FaultContext, param


@dataclass(frozen=True, slots=True)
class HttpError(LayerFault):
    """Answer ``status`` with ``body`` (an OpenAI-style JSON error when empty); the handler never runs."""

    kind: ClassVar[str] = "http_error"

    status: int = field(default=500, metadata=param("HTTP status to answer", minimum=400, maximum=599))
    body: str = field(default="", metadata=param("response body; empty = an OpenAI-style JSON error"))

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        return await self.arm(ctx, "http_error", status=self.status, body=self.body or None)
