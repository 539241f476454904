"""The EOS-boundary splice on hand-made token sequences; its result passes the judge's prefix rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_rollout_chaos.invariants.rules import first_mismatch
from pytest_rollout_chaos.tokens import PrefixSpliceError, splice_prefix

EOS = 2


def test_no_model_prefix_uses_the_template_unchanged() -> None:
    assert splice_prefix([], [5, 6, EOS], [5, 6, EOS, 9, 9], EOS) == [5, 6, EOS, 9, 9]


def test_model_tokens_are_kept_where_the_template_renders_them_differently() -> None:
    # The model generated 220, 17 then EOS; the template re-renders that turn as 1001.
    model_prefix = [10, 11, 220, 17, EOS]
    template_prefix = [10, 11, 1001, EOS, 30]
    template_ids = [10, 11, 1001, EOS, 30, 40, 41, 50]
    spliced = splice_prefix(model_prefix, template_prefix, template_ids, EOS)
    assert spliced == [10, 11, 220, 17, EOS, 30, 40, 41, 50]


def test_model_prefix_without_trailing_eos_gets_the_templates_eos() -> None:
    assert splice_prefix([1, 7], [1, 8, EOS], [1, 8, EOS, 4], EOS) == [1, 7, EOS, 4]


def test_a_template_that_does_not_grow_is_an_error() -> None:
    with pytest.raises(PrefixSpliceError, match="non-monotonically increasing"):
        splice_prefix([1, EOS], [1, EOS, 3], [1, EOS, 3], EOS)


def test_a_template_without_eos_in_the_prefix_is_an_error_naming_the_token() -> None:
    with pytest.raises(PrefixSpliceError, match="id 2"):
        splice_prefix([1, EOS], [1, 5], [1, 5, 6], EOS)


def test_the_cut_is_at_the_last_eos_of_the_prefix_not_the_first() -> None:
    template_prefix = [1, EOS, 3, 4, EOS, 9]
    template_ids = [*template_prefix, 7, 7]
    assert splice_prefix([1, EOS, 3, 5, EOS], template_prefix, template_ids, EOS) == [
        1,
        EOS,
        3,
        5,
        EOS,
        9,
        7,
        7,
    ]


@given(
    model=st.lists(st.integers(3, 50), min_size=1, max_size=20),
    rendered=st.lists(st.integers(3, 50), max_size=20),
    new_turn=st.lists(st.integers(3, 50), min_size=1, max_size=20),
)
def test_spliced_prompt_always_continues_the_model_tokens(
    model: list[int], rendered: list[int], new_turn: list[int]
) -> None:
    template_prefix = [*rendered, EOS]
    template_ids = [*template_prefix, *new_turn]
    spliced = splice_prefix([*model, EOS], template_prefix, template_ids, EOS)
    assert first_mismatch(spliced, [*model, EOS]) is None
    assert spliced[len(model) + 1 :] == new_turn
