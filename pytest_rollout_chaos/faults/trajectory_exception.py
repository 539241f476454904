"""Semantic fault: one trajectory raises inside the agent (HTTP 500, like NeMo Gym's middleware).

Aim it with ``row`` so one row fails and its siblings should not (slime PR #2078).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault, effect_param


@dataclass(frozen=True, slots=True)
class TrajectoryException(LayerFault):
    """Matching ``/run`` requests raise in the server: 500 with the exception repr as a JSON string."""

    kind: ClassVar[str] = "trajectory_exception"
    default_route: ClassVar[str | None] = "/run"

    effect: ClassVar[str] = "trajectory_exception"

    message: str = effect_param("trajectory_exception", "message")
