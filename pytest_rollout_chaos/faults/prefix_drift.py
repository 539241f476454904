"""Semantic fault: earlier prompt token ids change between turns (non-append-only retokenization).

A chat template that re-renders history, or decode-then-re-encode, gives back different ids
for tokens an earlier turn produced (NeMo RL #1337, NeMo Gym #1787). The hook changes one id
inside the history part of ``prompt_token_ids`` (replaced, or two merged into one), which
EOS-boundary splicing repairs. ``end_of_turn`` is the drift it cannot repair: the template
closes turns with another id than the EOS the model stopped on (a tokenizer and template that
disagree on the end-of-turn token), so no boundary is left to splice at and the row must abort.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault, effect_param
from pytest_rollout_chaos.servers.faultlayer.effects import DriftMode


@dataclass(frozen=True, slots=True)
class PrefixDrift(LayerFault):
    """Change an earlier token in ``prompt_token_ids`` of matching responses."""

    kind: ClassVar[str] = "prefix_drift"
    effect: ClassVar[str] = "prefix_drift"

    mode: DriftMode = effect_param("prefix_drift", "mode")  # noqa: RUF009 - a dataclasses.field
    replacement_token_id: int | None = effect_param("prefix_drift", "replacement_token_id", minimum=0)
