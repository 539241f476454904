"""A fresh repository's first ``pytest --rollout-chaos``: no warning from the plugin's dependencies,
with pytest-asyncio's fixture loop scope defaulted where the user set none."""

from __future__ import annotations

import pytest

ASYNC_TESTS = """
import asyncio

import pytest
import pytest_asyncio


@pytest_asyncio.fixture
async def value():
    await asyncio.sleep(0)
    return 42


@pytest.mark.asyncio
async def test_async_fixture(value):
    assert value == 42


def test_plain():
    pass
"""


def test_a_fresh_repo_runs_without_warnings(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")  # nothing about pytest-asyncio, as in a new repository
    pytester.makepyfile(test_fresh=ASYNC_TESTS)
    result = pytester.runpytest_subprocess("--rollout-chaos", "-p", "no:cacheprovider", "test_fresh.py")
    result.assert_outcomes(passed=2, warnings=0)
    result.stdout.fnmatch_lines(["asyncio: *asyncio_default_fixture_loop_scope=function*"])
    result.stderr.no_fnmatch_line("*Warning*")
    result.stdout.no_fnmatch_line("*is unset*")


def test_the_users_own_loop_scope_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = module\n")
    pytester.makepyfile(test_fresh=ASYNC_TESTS)
    result = pytester.runpytest_subprocess("--rollout-chaos", "-p", "no:cacheprovider", "test_fresh.py")
    result.assert_outcomes(passed=2, warnings=0)
    result.stdout.fnmatch_lines(["asyncio: *asyncio_default_fixture_loop_scope=module*"])
