"""The collector's contract, checked where the harness meets the collector.

ARCHITECTURE.md#the-collector-contract states it.

A factory that raises, a ``collect`` that is not ``async``, a result that is not a list of
``Rollout``, or a rollout for a row that was never requested is not an outcome to judge: it is
a ``CollectorContractError`` naming the collector, what was expected and what came back.

What a well-formed result *says* stays the invariants' business: a ``None`` entry (a row the
collector lost), a row with no rollout or with two (``accounted``), an aborted row without a
reason (``root_cause_visible``). Contract breaches are type errors; the invariants judge behaviour.
"""

from __future__ import annotations

import inspect
import reprlib
import traceback
from collections.abc import Sequence
from typing import Final

from pytest_rollout_chaos.collector.protocol import (
    STATUSES,
    Collector,
    CollectorContext,
    CollectorFactory,
    Rollout,
    Row,
    Turn,
    row_index,
)
from pytest_rollout_chaos.errors import CollectorContractError, NotJudgedError

SHAPE: Final = "async def collect(self, rows, *, mode) -> list[Rollout]"
_short = reprlib.Repr()
_short.maxstring = 80
_short.maxother = 80
_short.maxlist = 4


def describe(factory: object, target: str) -> str:
    """``collector 'pkg.mod:factory' (pkg/mod.py:12)``: the target as given, and where it is defined."""
    where = ""
    try:
        path = inspect.getsourcefile(factory)  # type: ignore[arg-type]
        _, line = inspect.getsourcelines(factory)  # type: ignore[arg-type]
    except (OSError, TypeError):
        path = None
    if path is not None:
        where = f" ({path}:{line})"
    return f"collector {target!r}{where}"


def build_collector(factory: CollectorFactory, ctx: CollectorContext, *, who: str) -> Collector:
    """``factory(ctx)``, checked: it returns, and what it returns has an ``async`` ``collect``.
    ``who`` names the collector in errors (``describe``)."""
    try:
        collector = factory(ctx)
    except NotJudgedError:
        raise  # the collector declines this scenario, naming why: not a breach
    except Exception as error:
        raise CollectorContractError(
            f"{who}: the factory raised {type(error).__name__}: {error}{_raised_at(error)}; "
            "expected it to return the collector (factory(ctx: CollectorContext) -> Collector)"
        ) from None
    collect = getattr(collector, "collect", None)
    if not callable(collect):
        raise CollectorContractError(
            f"{who}: the factory returned {_short.repr(collector)} ({type(collector).__name__}), "
            f"which has no collect method; expected a Collector with {SHAPE}"
        )
    if not _is_async(collect):
        raise CollectorContractError(
            f"{who}: {type(collector).__name__}.collect is a plain function, so it would block the "
            f"event loop and no deadline could stop it; expected {SHAPE}"
        )
    return collector


def check_rollouts(returned: object, rows: Sequence[Row], *, who: str) -> list[Rollout | None]:
    """``returned`` if it is a list of ``Rollout`` (``None`` entries allowed: lost rows, judged by
    ``accounted``) for requested rows; a ``CollectorContractError`` saying what is wrong otherwise."""
    if not isinstance(returned, list):
        raise CollectorContractError(
            f"{who}: collect returned {_short.repr(returned)} ({type(returned).__name__}); "
            f"expected a list of Rollout, one per row ({SHAPE})"
        )
    requested = {row_index(row, position) for position, row in enumerate(rows)}
    unknown: list[object] = []
    for position, item in enumerate(returned):
        if item is None:
            continue
        problem = _malformed(item)
        if problem is not None:
            raise CollectorContractError(f"{who}: collect returned a list whose item [{position}] {problem}")
        if item.row_index not in requested:
            unknown.append(item.row_index)
    if unknown:
        shown = f"0..{len(rows) - 1}" if requested == set(range(len(rows))) else sorted(requested)
        raise CollectorContractError(
            f"{who}: collect returned rollouts for row_index {sorted(set(unknown), key=repr)}, which "
            f"were never requested (the rows' _rowidx: {shown}); expected each Rollout.row_index to be "
            "its row's _rowidx, not a position or a count"
        )
    return returned


def _malformed(item: object) -> str | None:
    """What is wrong with one list entry, or None when it is a well-typed Rollout."""
    if not isinstance(item, Rollout):
        return f"is {_short.repr(item)} ({type(item).__name__}); expected a Rollout"
    if isinstance(item.row_index, bool) or not isinstance(item.row_index, int):
        return f"has row_index={item.row_index!r}; expected the row's _rowidx, an int"
    if item.status not in STATUSES:
        return f"has status={item.status!r}; expected one of {', '.join(STATUSES)}"
    if not isinstance(item.turns, list) or not all(isinstance(turn, Turn) for turn in item.turns):
        return f"(row {item.row_index}) has turns={_short.repr(item.turns)}; expected a list of Turn"
    return None


def _is_async(function: object) -> bool:
    """``async def``, also behind decorators that keep ``__wrapped__`` (functools.wraps)."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        inspect.unwrap(function)  # type: ignore[arg-type]
    )


def _raised_at(error: BaseException) -> str:
    """`` at file:line`` of the frame that raised, the collector's own code, not the harness."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename}:{last.lineno})"
