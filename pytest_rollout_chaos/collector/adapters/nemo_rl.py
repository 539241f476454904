"""The ``nemo_rl`` adapter: NeMo RL's real rollout code against the stack.

VALIDATION-ONLY STAND-IN for this branch: the adapter's factory and train mode are written in
their own change, whose collector hands validation to ``nemo_rl_validation.collect`` as this one
does. Here train-mode scenarios skip (``modes``), saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

from pytest_rollout_chaos.collector.adapters import nemo_rl_validation
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.collector.protocol import CollectorContext, Mode, Rollout, Row

UPSTREAM = Upstream(
    adapter="nemo_rl",
    modules=("nemo_rl.environments.nemo_gym", "nemo_rl.experience.rollouts"),
    install=(
        "pip install torch==2.13.0 numpy pillow requests typing_extensions transformers==5.5.4 "
        "ray==2.60.0 datasets fastapi uvicorn pyzmq rich tqdm wandb decord"
    ),
)
VALIDATION_ONLY: Final = "validation-only stand-in; train mode is the nemo_rl adapter's own change"


class NemoRLCollector:
    """Validation mode through ``nemo_rl_validation``; no train mode in this stand-in."""

    modes: ClassVar[tuple[Mode, ...]] = ("validation",)

    def __init__(self, ctx: CollectorContext) -> None:
        self._ctx = ctx
        nemo_rl_validation.preload()

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        if mode != "validation":
            raise NotImplementedError(VALIDATION_ONLY)
        return await nemo_rl_validation.collect(self._ctx, rows)


factory = NemoRLCollector
