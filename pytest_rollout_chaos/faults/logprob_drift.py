"""Semantic fault: logprobs come back finite but drifted from what the model computed.

Before vLLM 0.17.0, vLLM's logprobs for some sequences diverged from what the trainer's own
forward pass computes for the same tokens (NeMo RL's Nemotron 3 Nano guide): finite values that
no check for NaN catches. NeMo RL's defence is ``grpo.seq_logprob_error_threshold`` (2 in NeMo
Gym's configs), which masks a sequence whose generation logprobs disagree with the policy's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault, effect_param


@dataclass(frozen=True, slots=True)
class LogprobDrift(LayerFault):
    """Subtract ``drift_nats`` from every logprob in matching responses (chat, completions, Gym items)."""

    kind: ClassVar[str] = "logprob_drift"
    effect: ClassVar[str] = "logprob_drift"

    drift_nats: float = effect_param("logprob_drift", "drift_nats")
