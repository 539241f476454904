"""Semantic fault: matching requests get no answer until the fault heals (or ``max_hang_s``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault, effect_param


@dataclass(frozen=True, slots=True)
class Hang(LayerFault):
    """The request waits inside the server; healing releases it (then it is answered normally)."""

    kind: ClassVar[str] = "hang"
    effect: ClassVar[str] = "hang"

    max_hang_s: float | None = effect_param("hang", "max_hang_s")
