"""The ``verl`` adapter: the verl NeMo Gym recipe against the stack (written in its own change)."""

from __future__ import annotations

from pytest_rollout_chaos.collector.adapters.upstream import Upstream

UPSTREAM = Upstream(
    adapter="verl",
    modules=("nemo_gym.agent_loop",),
    install="pip install verl==0.9.1",
)
