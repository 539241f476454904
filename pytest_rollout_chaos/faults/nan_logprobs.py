"""Semantic fault: logprobs come back NaN, null or Infinity, or the call fails like vLLM's 500.

The shapes follow what trainers met upstream: a NaN literal in the JSON (NeMo RL #1885), a
``null`` (TRL #6166), or vLLM's HTTP 500 when it cannot encode a NaN (NeMo RL #2962).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault, effect_param
from pytest_rollout_chaos.servers.faultlayer.effects import LogprobShape


@dataclass(frozen=True, slots=True)
class NanLogprobs(LayerFault):
    """Rewrite logprob values in matching responses (chat, completions, Gym output items)."""

    kind: ClassVar[str] = "nan_logprobs"
    effect: ClassVar[str] = "nan_logprobs"

    shape: LogprobShape = effect_param("nan_logprobs", "shape")  # noqa: RUF009 - a dataclasses.field
    token_index: int | None = effect_param("nan_logprobs", "token_index", minimum=0)
