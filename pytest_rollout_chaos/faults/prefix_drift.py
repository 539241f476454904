"""Semantic fault: earlier prompt token ids change between turns (non-append-only retokenization).

A chat template that re-renders history, or decode-then-re-encode, gives back different ids
for tokens an earlier turn produced (NeMo RL #1337, NeMo Gym #1787). The hook changes one id
inside the history part of ``prompt_token_ids`` (replaced, or two merged into one), which
EOS-boundary splicing repairs. ``end_of_turn`` is the drift it cannot repair: the template
closes turns with another id than the EOS the model stopped on (a tokenizer and template that
disagree on the end-of-turn token), so no boundary is left to splice at and the row must abort.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pytest_rollout_chaos.faults._layer_fault import LayerFault
from pytest_rollout_chaos.faults.base import FaultContext, param


@dataclass(frozen=True, slots=True)
class PrefixDrift(LayerFault):
    """Change an earlier token in ``prompt_token_ids`` of matching responses."""

    kind: ClassVar[str] = "prefix_drift"

    mode: Literal["replace", "merge", "end_of_turn"] = field(
        default="replace",
        metadata=param(
            "replace one id, merge two ids into one, or (end_of_turn) re-render every end of turn "
            "with another id than the EOS the model stopped on"
        ),
    )
    replacement_token_id: int | None = field(
        default=None, metadata=param("the id put in; empty = a neighbouring id", minimum=0)
    )

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        return await self.arm(
            ctx, "prefix_drift", mode=self.mode, replacement_token_id=self.replacement_token_id
        )
