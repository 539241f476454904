"""EOS-boundary splicing and the token checks."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.collector.prefix import SpliceError, repair_turns, splice
from pytest_rollout_chaos.collector.protocol import Turn
from pytest_rollout_chaos.collector.results import bad_logprob, prefix_mismatch

EOS = 2


def test_splice_keeps_the_model_tokens_and_takes_the_new_turn_from_the_template() -> None:
    model = [1, 5, EOS, 7, 8, EOS]  # two earlier turns ending in EOS
    template = [1, 5, EOS, 7, 9, 9, EOS, 30, 31]
    assert splice(model, template, [EOS]) == [1, 5, EOS, 7, 8, EOS, 30, 31]


@pytest.mark.parametrize(
    ("model", "template", "message"),
    [
        ([1, 7, 8], [1, 7, 9, EOS, 30], "did not end with EOS"),
        ([1, 7, EOS], [1, 7, 9, 30], "fewer than the 1"),
        ([1, 7, EOS], [1, 7, 9, EOS], "adds nothing"),
    ],
)
def test_splice_refuses_what_it_cannot_repair(model: list[int], template: list[int], message: str) -> None:
    with pytest.raises(SpliceError, match=message):
        splice(model, template, [EOS])
    with pytest.raises(SpliceError, match="no EOS token ids"):
        splice(model, template, [])


def test_repair_turns_only_touches_drifted_turns() -> None:
    turns = [Turn([1, 5], [6, EOS], [-1.0, -1.0]), Turn([1, 5, 6, EOS, 9], [10, EOS], [-1.0, -1.0])]
    assert repair_turns(turns, [EOS]) == turns
    drifted = [turns[0], Turn([1, 5, 7, EOS, 9], [10, EOS], [-1.0, -1.0])]
    assert prefix_mismatch(drifted) is not None
    repaired = repair_turns(drifted, [EOS])
    assert repaired[1].prompt_token_ids == [1, 5, 6, EOS, 9]
    assert prefix_mismatch(repaired) is None


def test_bad_logprob_names_the_place() -> None:
    assert bad_logprob([Turn([1], [2, 3], [-1.0, -2.0])]) is None
    assert (
        bad_logprob([Turn([1], [2, 3], [-1.0, float("inf")])]) == "non-finite logprob inf at turn 0, token 1"
    )
    assert bad_logprob([Turn([1], [2, 3], [-1.0])]) == "turn 0 has 1 logprobs for 2 generated tokens"
