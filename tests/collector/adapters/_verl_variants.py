"""Targets for the ``verl`` adapter's fidelity tests (``tests.collector.adapters._verl_variants:NAME``).

verl 0.9.1 needs transformers 5, where ``apply_chat_template(tokenize=True)`` answers a
``BatchEncoding``; the recipe's ``_empty_result`` slices it as transformers 4's token-id list
and crashes. ``on_transformers_4`` is the real adapter with the tokenizer answering as
transformers 4 does, so the recipe's dummy substitution happens as in the container its
README names (vLLM 0.17.0, which requires transformers < 5). ``hides_placeholder`` is that
adapter broken on purpose: it reports the dummy's row aborted, so the judge never sees a
placeholder handed back as training data. ``generation_only`` is the real adapter broken on
purpose another way: it stops at the manager's output, as the adapter did before it went on to
the batch ``RayPPOTrainer.fit`` hands ``update_actor``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings
from pytest_rollout_chaos.collector.adapters.verl import VerlCollector
from pytest_rollout_chaos.collector.protocol import CollectorContext, Mode, Rollout, Row


class Transformers4Tokenizer:
    """verl's tokenizer, except that ``apply_chat_template`` returns token ids (transformers 4)."""

    def __init__(self, tokenizer: Any) -> None:
        object.__setattr__(self, "_inner", tokenizer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)  # the recipe sets padding_side before each pad

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any:
        return self._inner.apply_chat_template(conversation, return_dict=False, **kwargs)


class OnTransformers4(VerlCollector):
    """The real adapter over a tokenizer that answers like transformers 4."""

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.tokenizer = Transformers4Tokenizer(self.tokenizer)


class HidesPlaceholder(OnTransformers4):
    """Broken on purpose: a row packed as the recipe's 1-token dummy is reported aborted."""

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        return [
            Rollout(rollout.row_index, "aborted", error="verl substituted its empty result")
            if looks_like_placeholder(rollout)
            else rollout
            for rollout in await super().collect(rows, mode=mode)
        ]


class GenerationOnly(VerlCollector):
    """Broken on purpose: reads the manager's output, never the batch verl's ``fit`` makes of it."""

    def train_batch(self, step: Any, output: Any, taken: TrainerSettings) -> Any:
        return output


def looks_like_placeholder(rollout: Rollout) -> bool:
    """The shape ``_empty_result`` packs: one turn, its one prompt token "generated" again, reward 0."""
    if len(rollout.turns) != 1 or rollout.reward != 0.0:
        return False
    turn = rollout.turns[0]
    return len(turn.prompt_token_ids) == 1 and turn.generation_token_ids == turn.prompt_token_ids


on_transformers_4 = OnTransformers4
hides_placeholder = HidesPlaceholder
generation_only = GenerationOnly
