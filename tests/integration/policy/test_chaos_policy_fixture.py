"""The ``chaos_policy`` fixture in a real pytest run: one tiny server per session, stopped at the end."""

from __future__ import annotations

import re

import psutil
import pytest

from tests.conftest import INNER_ASYNCIO_INI

pytestmark = pytest.mark.slow  # starts the tiny policy server

INNER_TEST = """
import json
import os
import urllib.request

import pytest


@pytest.mark.parametrize("attempt", [1, 2])
def test_policy(chaos_policy, attempt):
    assert chaos_policy.backend == "tiny"
    assert chaos_policy.base_url == chaos_policy.url + "/v1"
    assert chaos_policy.model_dir.is_dir()
    with urllib.request.urlopen(chaos_policy.base_url + "/models", timeout=10) as response:
        assert json.load(response)["data"][0]["id"] == chaos_policy.model
    print("POLICY-PID", chaos_policy.process.pid)
"""


def test_chaos_policy_serves_the_session_and_stops(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n" + INNER_ASYNCIO_INI)
    pytester.makepyfile(test_inner=INNER_TEST)
    result = pytester.runpytest_subprocess("--rollout-chaos", "-s", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=2)
    pids = {match.group(1) for line in result.outlines if (match := re.search(r"POLICY-PID (\d+)", line))}
    assert len(pids) == 1, result.outlines  # one server for the whole session
    pid = int(pids.pop())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_chaos_policy_is_skipped_without_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n" + INNER_ASYNCIO_INI)
    pytester.makepyfile(test_inner=INNER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(skipped=2)
