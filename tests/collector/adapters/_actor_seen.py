"""A child pytest's plugin (``-p tests.collector.adapters._actor_seen``): the Ray actors each scenario
started.

After each scenario the JUnit property ``ray_actors`` holds, as JSON, this process's pid and the
``ray.remote(...)`` events of the scenario's History (actor name, its pid and node), so that the
parent can tell a real actor in another process was driven, not the stand-in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from typing import Final

import pytest

from pytest_rollout_chaos.report.reports import RESULT_KEY

PROPERTY: Final = "ray_actors"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    try:
        return (yield)
    finally:
        result = item.stash.get(RESULT_KEY, None)
        if result is not None:
            started = [
                event.data
                for event in result.history
                if event.op == "upstream" and str(event.data.get("call", "")).startswith("ray.remote(")
            ]
            item.user_properties.append(
                (PROPERTY, json.dumps({"pytest_pid": os.getpid(), "actors": started}))
            )
