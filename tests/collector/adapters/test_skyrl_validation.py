"""The ``skyrl`` adapter's validation runs SkyRL's own ``RayPPOTrainer.eval`` over one eval batch
and reads back, unchanged, the ``GeneratorOutput`` the generator handed ``evaluate``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_rollout_chaos.collector.adapters import skyrl_validation


class _Generator:
    async def generate(self, batch: Any) -> Any:
        return {"answered": list(batch)}


class _Trainer:
    """What ``RayPPOTrainer.eval`` does with what it holds, for the read-out alone: each batch of
    its eval dataloader through its generator's ``generate``, metrics returned."""

    def __init__(self, fails: bool = False) -> None:
        self.generator = _Generator()
        self.fails = fails
        self.seen: list[Any] = []

    async def eval(self) -> dict[str, float]:
        self.seen = [self.global_step, self.tracker, len(self.eval_dataloader)]  # type: ignore[attr-defined]
        for batch in self.eval_dataloader:  # type: ignore[attr-defined]
            await self.generator.generate(batch)
        if self.fails:
            raise TimeoutError("timed out")
        return {"eval/all/avg_score": 1.0}


def test_the_output_the_generator_handed_evaluate_is_read_back_unchanged() -> None:
    made = _Trainer()
    prompts = [{"uid": "0"}, {"uid": "1"}]
    output = asyncio.run(skyrl_validation.evaluate(made, prompts))
    assert output == {"answered": prompts}
    assert made.seen == [skyrl_validation.GLOBAL_STEP, None, 1], "one eval batch, no tracker, step 0"
    assert "generate" not in vars(made.generator), "the generator's own generate again"


def test_what_the_evaluation_raises_goes_on_unchanged() -> None:
    made = _Trainer(fails=True)
    with pytest.raises(TimeoutError, match="timed out"):
        asyncio.run(skyrl_validation.evaluate(made, [{"uid": "0"}]))
    assert "generate" not in vars(made.generator)
