"""``engine.run``: what a collection's event loop leaves behind is finalized with it."""

from __future__ import annotations

import warnings

from pytest_rollout_chaos.engine.run import leftovers


class _Leaky:
    """An unclosed resource in a reference cycle, as a detached task's HTTP session is."""

    def __init__(self) -> None:
        self.me = self  # only the garbage collector finalizes it

    def __del__(self) -> None:
        warnings.warn("unclosed session <Leaky>", ResourceWarning, stacklevel=1)


def test_what_a_collection_left_unclosed_is_finalized_with_its_loop_and_named() -> None:
    _Leaky()
    assert leftovers() == ["unclosed session <Leaky>"]
    assert leftovers() == []
