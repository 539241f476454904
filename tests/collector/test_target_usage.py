"""A bad ``--rollout-chaos-target`` stops the run with a usage error that says what is wrong."""

from __future__ import annotations

import pytest


def test_unloadable_target_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-target=no_such_pkg_xyz.chaos:make")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--rollout-chaos-target: target 'no_such_pkg_xyz.chaos:make': module*not found*"]
    )


def test_loadable_target_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        my_collector="def make(ctx):\n    return ctx\n",
        test_it="def test_nothing():\n    pass\n",
    )
    pytester.syspathinsert()
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-target=my_collector:make")
    result.assert_outcomes(passed=1)
