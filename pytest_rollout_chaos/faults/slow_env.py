"""Semantic fault: the environment is slow per call and per item (NeMo RL #1798).

Arms a ``delay`` on the resources server's ``/step_batch``: each call waits ``delay_ms`` plus
``per_item_ms`` for every item of the batch, so per-sample calls cost far more than one
batched call, which is what ``batched_env_eval`` shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault
from pytest_rollout_chaos.faults.base import FaultContext, Targets, param


@dataclass(frozen=True, slots=True)
class SlowEnv(LayerFault):
    """Delay matching environment calls by ``delay_ms + per_item_ms * batch size``."""

    kind: ClassVar[str] = "slow_env"
    targets: ClassVar[Targets] = ("resources",)
    default_route: ClassVar[str | None] = "/step_batch"

    delay_ms: float = field(default=200.0, metadata=param("fixed delay per call", minimum=0))
    per_item_ms: float = field(default=0.0, metadata=param("extra delay per item in the batch", minimum=0))

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        return await self.arm(ctx, "delay", delay_ms=self.delay_ms, per_item_ms=self.per_item_ms)
