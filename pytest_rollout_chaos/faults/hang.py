"""Semantic fault: matching requests get no answer until the fault heals (or ``max_hang_s``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault
from pytest_rollout_chaos.faults.base import FaultContext, param


@dataclass(frozen=True, slots=True)
class Hang(LayerFault):
    """The request waits inside the server; healing releases it (then it is answered normally)."""

    kind: ClassVar[str] = "hang"

    max_hang_s: float | None = field(
        default=None, metadata=param("release after this long even if not healed; empty = never", minimum=0)
    )

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        return await self.arm(ctx, "hang", max_hang_s=self.max_hang_s)
