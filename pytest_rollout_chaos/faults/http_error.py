"""Semantic fault: matching requests get an HTTP error status instead of an answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault, effect_param


@dataclass(frozen=True, slots=True)
class HttpError(LayerFault):
    """Answer ``status`` with ``body`` (an OpenAI-style JSON error when empty); the handler never runs."""

    kind: ClassVar[str] = "http_error"
    effect: ClassVar[str] = "http_error"

    status: int = effect_param("http_error", "status")
    # a scenario's body is text; the layer takes null (not "") for its JSON error
    body: str = effect_param("http_error", "body", default="")

    def effect_params(self) -> dict[str, Any]:
        return {**LayerFault.effect_params(self), "body": self.body or None}
