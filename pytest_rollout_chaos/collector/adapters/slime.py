"""The ``slime`` adapter: slime's real rollout code against the stack (written in its own change)."""

from __future__ import annotations

from pytest_rollout_chaos.collector.adapters.upstream import Upstream

UPSTREAM = Upstream(
    adapter="slime",
    modules=("slime.rollout.sglang_rollout",),
    install=(
        "pip install torch==2.13.0 numpy pillow aiohttp httpx pyarrow pybase64 pylatexenc sympy "
        "tqdm packaging"
    ),
)
