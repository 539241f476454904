"""Root causes and the unreachable/answered distinction."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rollout_chaos.collector.failures import all_or_first_error, is_unreachable, root_cause
from pytest_rollout_chaos.collector.gym_client import GymRequestError


def _chained(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


def test_root_cause_names_outer_and_innermost() -> None:
    error = _chained(RuntimeError("collect failed"), ValueError("row 3 had no output"))
    assert root_cause(error) == "RuntimeError: collect failed (caused by ValueError: row 3 had no output)"
    assert root_cause(KeyError()) == "KeyError"


def test_root_cause_never_a_bare_cancelled_error() -> None:
    assert "CancelledError" in root_cause(asyncio.CancelledError())
    assert root_cause(asyncio.CancelledError()) != "CancelledError"
    wrapped = _chained(asyncio.CancelledError(), GymRequestError("agent", "http://a/run", 500, "boom"))
    assert root_cause(wrapped) == "GymRequestError: agent (http://a/run) failed: HTTP 500: boom"


@pytest.mark.parametrize(
    ("error", "unreachable"),
    [
        (ConnectionRefusedError(111, "refused"), True),
        (_chained(GymRequestError("agent", "http://a/run", None, "x"), ConnectionResetError()), True),
        (GymRequestError("agent", "http://a/run", None, "Cannot connect to host a:1"), True),
        (GymRequestError("agent", "http://a/run", 500, "connection refused by the tool"), False),
        (GymRequestError("agent", "http://a/run", None, "no answer within 2.0 s"), False),
        (ValueError("bad json"), False),
    ],
)
def test_is_unreachable(error: BaseException, unreachable: bool) -> None:
    assert is_unreachable(error) is unreachable


@pytest.mark.asyncio
async def test_all_or_first_error_cancels_siblings_and_raises_the_cause() -> None:
    cancelled: list[str] = []

    async def slow() -> int:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise
        return 1

    async def bad() -> int:
        await asyncio.sleep(0.01)
        raise ValueError("the real cause")

    with pytest.raises(ValueError, match="the real cause"):
        await all_or_first_error([slow(), bad()])
    assert cancelled == ["slow"]
    assert await all_or_first_error([asyncio.sleep(0, result=1), asyncio.sleep(0, result=2)]) == [1, 2]
