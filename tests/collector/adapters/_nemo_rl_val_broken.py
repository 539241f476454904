"""The ``nemo_rl`` validation adapter broken on purpose, to show its gate test guards its fidelity.

``self_batching`` rolls out with NeMo RL's batched ``run_multi_turn_rollout`` itself instead of
calling ``validate()``: the environment is stepped once per task group per turn whatever the
tree's ``validate()`` would have done, so the tree before PR #2209 looks fixed (green).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pytest_rollout_chaos.collector.adapters.nemo_rl_validation import NemoRL, ValidateCall, Validation
from pytest_rollout_chaos.collector.protocol import CollectorContext, Mode, Rollout, Row


class SelfBatching(Validation):
    def drive(self, nemo: NemoRL, call: ValidateCall) -> Any:
        config = call.master_config
        batch, _ = nemo.rollouts.run_multi_turn_rollout(
            call.policy_generation,
            next(iter(call.val_dataloader)),
            call.tokenizer,
            call.val_task_to_env,
            max_seq_len=config["policy"]["max_total_sequence_length"],
            max_rollout_turns=config["grpo"]["max_rollout_turns"],
        )
        return batch


class SelfBatchingCollector:
    modes: ClassVar[tuple[Mode, ...]] = ("validation",)

    def __init__(self, ctx: CollectorContext) -> None:
        self._ctx = ctx

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        return await SelfBatching(self._ctx).collect(rows)


self_batching = SelfBatchingCollector
