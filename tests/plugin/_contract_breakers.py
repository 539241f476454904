"""Tiny collectors that each break the collector contract one way (ARCHITECTURE.md#the-collector-contract).

Used by ``tests/collector/test_contract.py`` directly and, copied into a pytester project, as
``--rollout-chaos-target=contract_breakers:NAME`` by ``tests/plugin/test_contract.py``. None of
them touches ``ctx``: the breach is the whole point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_rollout_chaos import CollectorContext, Mode, Rollout, Row, row_index


def raising_factory(ctx: CollectorContext) -> Any:
    raise RuntimeError("no GPU configured for the rollout workers")


class SyncCollect:
    """``collect`` without ``async``: it would block the event loop past every deadline."""

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx

    def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        return [Rollout(row_index(row, i), "aborted", error="never ran") for i, row in enumerate(rows)]


class ReturnsDict:
    """The trainer's batch dict handed back instead of the rollouts."""

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> Any:
        return {"rollouts": [Rollout(row_index(row, i), "completed") for i, row in enumerate(rows)]}


class ReturnsDicts:
    """A list, but of raw ``/run``-like dicts rather than ``Rollout``."""

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> Any:
        return [{"row_index": row_index(row, i), "status": "completed"} for i, row in enumerate(rows)]


class OneBased:
    """Numbers rollouts 1..N instead of by ``_rowidx``: the last one names a row never requested."""

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        return [Rollout(i + 1, "aborted", error="not run") for i, _ in enumerate(rows)]
