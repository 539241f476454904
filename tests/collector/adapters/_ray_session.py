"""Ray for the adapters' tests: the plugin's own local cluster, in this pytest or in a child one.

In this process, the ``ray_session`` fixture opens a one-node cluster the way
``--rollout-chaos-ray=local:1`` does (a ``ray start`` node under pytest's tmp path, this run's
own auth token, the reaper behind it) and connects to it; a child pytest simply gets that option
(``RAY_ON``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pytest

RAY_ON: Final = ("--rollout-chaos-ray=local:1",)


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Ray connected in this pytest process to a local one-node cluster; skips where Ray is not installed."""
    ray = pytest.importorskip("ray")
    from pytest_rollout_chaos.ray.launch import open_cluster
    from pytest_rollout_chaos.ray.mode import parse

    cluster = open_cluster(
        parse("local:1"), tmp_path_factory.mktemp("ray"), tmp_path_factory.mktemp("ray-logs"), "adapters"
    )
    try:
        yield ray
    finally:
        cluster.close()
