"""``engine.run``: what a collection's event loop leaves behind is finalized with it."""

from __future__ import annotations

import traceback
import warnings

from pytest_rollout_chaos.engine.run import finalized, release_frames


class _Leaky:
    """An unclosed resource in a reference cycle, as a detached task's HTTP session is."""

    def __init__(self) -> None:
        self.me = self  # only the garbage collector finalizes it

    def __del__(self) -> None:
        warnings.warn("unclosed session <Leaky>", ResourceWarning, stacklevel=1)


def test_what_a_collection_left_unclosed_is_finalized_with_its_loop_and_named() -> None:
    with finalized() as left:
        _Leaky()
    assert left == ["unclosed session <Leaky>"]
    with finalized() as left:
        pass
    assert left == []


class _Unclosed:
    """An unclosed resource that only a raising frame's locals hold."""

    def __del__(self) -> None:
        warnings.warn("unclosed session <Unclosed>", ResourceWarning, stacklevel=1)


def _post() -> None:
    session = _Unclosed()  # held by this frame, which the raised error's traceback keeps
    raise ConnectionError(f"503 from {type(session).__name__}")


def _step() -> None:
    try:
        _post()
    except ConnectionError as error:
        raise RuntimeError("the step failed") from error


def test_what_a_raising_frame_held_is_let_go_with_the_loop_and_its_traceback_still_reads() -> None:
    try:
        _step()
    except RuntimeError as raised:
        error = raised
    lines = traceback.format_tb(error.__cause__.__traceback__ if error.__cause__ else None)
    with finalized() as left:
        pass
    assert left == []  # the session is still held by the kept error
    with finalized() as left:
        release_frames(error)
    assert left == ["unclosed session <Unclosed>"]
    assert traceback.format_tb(error.__cause__.__traceback__ if error.__cause__ else None) == lines


def test_a_resource_warning_in_the_block_is_kept_and_any_other_warning_goes_on() -> None:
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with finalized() as left:
            warnings.warn("unclosed transport <Dropped>", ResourceWarning, stacklevel=1)
            warnings.warn("the trainer's own", UserWarning, stacklevel=1)
    assert left == ["unclosed transport <Dropped>"]
    assert [str(item.message) for item in shown] == ["the trainer's own"]


async def _abandoned() -> None:
    """A coroutine a trainer made and never awaited."""


def test_a_coroutine_abandoned_unawaited_is_kept_as_the_collections() -> None:
    with finalized() as left:
        _abandoned()  # type: ignore[unused-coroutine]  # the point: it is never awaited
    assert left == ["coroutine '_abandoned' was never awaited"]
