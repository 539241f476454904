"""Semantic fault: the environment is slow per call and per item (NeMo RL #1798).

Arms a ``delay`` on the resources server's ``/step_batch``: each call waits ``delay_ms`` plus
``per_item_ms`` for every item of the batch, so per-sample calls cost far more than one
batched call, which is what ``batched_env_eval`` shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault, effect_param
from pytest_rollout_chaos.faults.base import Targets


@dataclass(frozen=True, slots=True)
class SlowEnv(LayerFault):
    """Delay matching environment calls by ``delay_ms + per_item_ms * batch size``."""

    kind: ClassVar[str] = "slow_env"
    targets: ClassVar[Targets] = ("resources",)
    default_route: ClassVar[str | None] = "/step_batch"
    effect: ClassVar[str] = "delay"

    # floats as a scenario gives them; the layer's own defaults are 0
    delay_ms: float = effect_param("delay", "delay_ms", default=200.0)
    per_item_ms: float = effect_param("delay", "per_item_ms", default=0.0)
