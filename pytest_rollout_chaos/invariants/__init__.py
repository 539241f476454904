"""Invariants: pure judges of an Observation, one module per invariant.

Their names are an interface (ARCHITECTURE.md#history-and-invariants).
"""

from __future__ import annotations

from pytest_rollout_chaos.invariants.base import Checker, Observation, Status, Verdict
from pytest_rollout_chaos.invariants.compose import assert_all_pass, check_all, check_one, worst
from pytest_rollout_chaos.invariants.registry import BY_NAME, NAMES, get

__all__ = [
    "BY_NAME",
    "NAMES",
    "Checker",
    "Observation",
    "Status",
    "Verdict",
    "assert_all_pass",
    "check_all",
    "check_one",
    "get",
    "worst",
]
