"""The collector contract: each breach by a real tiny collector is one ``CollectorContractError``
naming the collector, what was expected and what came back; what a well-formed result says is
left to the invariants."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import pytest

from pytest_rollout_chaos import CollectorContext, CollectorContractError, Mode, Rollout, Row
from pytest_rollout_chaos.collector import contract
from tests.plugin import _contract_breakers as breakers

# These collectors never touch the context: the contract is about what they are and return.
NO_CONTEXT = cast(CollectorContext, None)
ROWS: list[Row] = [{"_rowidx": 0}, {"_rowidx": 1}]


async def _collect(factory: Any, target: str) -> list[Rollout | None]:
    who = contract.describe(factory, target)
    collector = contract.build_collector(factory, NO_CONTEXT, who=who)
    return contract.check_rollouts(await collector.collect(ROWS, mode="train"), ROWS, who=who)


def test_the_collector_is_named_by_its_target_and_where_its_factory_is_defined() -> None:
    _, line = inspect.getsourcelines(breakers.ReturnsDict)
    assert contract.describe(breakers.ReturnsDict, "contract_breakers:ReturnsDict") == (
        f"collector 'contract_breakers:ReturnsDict' ({breakers.__file__}:{line})"
    )


def test_a_factory_that_raises_names_the_error_and_where_it_was_raised() -> None:
    with pytest.raises(CollectorContractError) as caught:
        contract.build_collector(breakers.raising_factory, NO_CONTEXT, who="collector 'x:raising_factory'")
    message = str(caught.value)
    assert message.startswith(
        "collector 'x:raising_factory': the factory raised RuntimeError: no GPU configured for the "
        f"rollout workers (at {breakers.__file__}:"
    )
    assert message.endswith(
        "expected it to return the collector (factory(ctx: CollectorContext) -> Collector)"
    )
    assert caught.value.__cause__ is None, "no chained traceback into the harness"
    assert caught.value.__suppress_context__, "no chained traceback into the harness"


@pytest.mark.asyncio
async def test_a_collect_that_is_not_async_is_refused_before_it_runs() -> None:
    with pytest.raises(
        CollectorContractError,
        match=r"^collector 'x:SyncCollect' \(.*\): SyncCollect.collect is a plain function, .*; "
        r"expected async def collect\(self, rows, \*, mode\) -> list\[Rollout\]$",
    ):
        await _collect(breakers.SyncCollect, "x:SyncCollect")


def test_a_factory_that_returns_no_collector_says_what_it_returned() -> None:
    with pytest.raises(
        CollectorContractError, match=r"the factory returned 42 \(int\), which has no collect method"
    ):
        contract.build_collector(lambda ctx: 42, NO_CONTEXT, who="collector 'x:y'")  # type: ignore[arg-type,return-value]


@pytest.mark.asyncio
async def test_an_async_collect_behind_a_wrapping_decorator_is_async() -> None:
    def logged(method: Callable[..., Awaitable[list[Rollout]]]) -> Callable[..., Awaitable[list[Rollout]]]:
        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Awaitable[list[Rollout]]:
            return method(*args, **kwargs)

        return wrapper

    class Decorated:
        def __init__(self, ctx: CollectorContext) -> None:
            pass

        @logged
        async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
            return [Rollout(0, "completed"), Rollout(1, "completed")]

    assert await _collect(Decorated, "x:Decorated") == [Rollout(0, "completed"), Rollout(1, "completed")]


@pytest.mark.asyncio
async def test_a_result_that_is_not_a_list_says_what_came_back() -> None:
    with pytest.raises(CollectorContractError) as caught:
        await _collect(breakers.ReturnsDict, "x:ReturnsDict")
    assert ": collect returned {'rollouts': [Rollout(" in str(caught.value)
    assert str(caught.value).endswith(
        "(dict); expected a list of Rollout, one per row "
        "(async def collect(self, rows, *, mode) -> list[Rollout])"
    )


@pytest.mark.asyncio
async def test_a_list_of_something_else_names_the_first_bad_item() -> None:
    with pytest.raises(
        CollectorContractError,
        match=r": collect returned a list whose item \[0\] is \{'row_index': 0, 'status': 'completed'\} "
        r"\(dict\); expected a Rollout$",
    ):
        await _collect(breakers.ReturnsDicts, "x:ReturnsDicts")


@pytest.mark.parametrize(
    ("rollout", "problem"),
    [
        (Rollout(cast(int, "0"), "completed"), r"has row_index='0'; expected the row's _rowidx, an int"),
        (Rollout(cast(int, True), "completed"), r"has row_index=True; expected the row's _rowidx, an int"),
        (
            Rollout(0, cast(Any, "failed")),
            r"has status='failed'; expected one of completed, truncated, aborted",
        ),
        (
            Rollout(0, "completed", turns=cast(Any, [[1, 2]])),
            r"\(row 0\) has turns=\[\[1, 2\]\]; expected a list of Turn",
        ),
    ],
    ids=["row-index-str", "row-index-bool", "status", "turns"],
)
def test_a_malformed_rollout_names_the_field(rollout: Rollout, problem: str) -> None:
    with pytest.raises(
        CollectorContractError,
        match=rf"^collector 'x:y': collect returned a list whose item \[1\] {problem}$",
    ):
        contract.check_rollouts([Rollout(1, "completed"), rollout], ROWS, who="collector 'x:y'")


@pytest.mark.asyncio
async def test_a_rollout_for_a_row_never_requested_is_a_contract_error() -> None:
    with pytest.raises(
        CollectorContractError,
        match=r"^collector 'x:OneBased' \(.*\): collect returned rollouts for row_index \[2\], "
        r"which were never requested \(the rows' _rowidx: 0\.\.1\); "
        r"expected each Rollout\.row_index to be its row's _rowidx",
    ):
        await _collect(breakers.OneBased, "x:OneBased")


def test_lost_and_duplicated_rows_are_left_to_the_invariants() -> None:
    # None is a row the collector lost, a repeated row_index a duplicate: ``accounted`` judges both.
    returned: list[Rollout | None] = [Rollout(0, "completed"), Rollout(0, "completed"), None]
    assert contract.check_rollouts(returned, ROWS, who="collector 'x:y'") is returned
