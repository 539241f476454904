"""Policy batching efficiency: tokens/s of the tiny policy server at concurrency 32 vs 1.

Reuses ``benchmarks/policy_throughput.py`` (which also runs on its own): every request
generates exactly ``tokens`` tokens, so the ratio compares like with like. Goal: at least 8x,
since concurrent requests share decode steps in the batching engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path

from benchmarks._result import Number, Result
from benchmarks._stack import builder
from benchmarks.policy_throughput import tokens_per_s

GOAL_RATIO = 8.0


def run(*, tokens: int = 64, rounds: int = 2) -> Result:
    with tempfile.TemporaryDirectory(prefix="bench-policy-") as log_dir, contextlib.ExitStack() as stack:
        policy = builder(stack, Path(log_dir)).policy_replicas[0]
        asyncio.run(tokens_per_s(policy.url, 4, 4, 8))  # warm-up
        sequential = asyncio.run(tokens_per_s(policy.url, 1, 4 * rounds, tokens))
        concurrent = asyncio.run(tokens_per_s(policy.url, 32, 32 * rounds, tokens))
    return Result(
        "policy_batching",
        (
            Number("concurrency 1", sequential, "tokens/s"),
            Number("concurrency 32", concurrent, "tokens/s"),
            Number("ratio", concurrent / sequential, "x", GOAL_RATIO, "at_least"),
        ),
        details={"tokens_per_request": tokens, "rounds": rounds},
    )
