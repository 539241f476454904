"""``--rollout-chaos-target=skyrl_skip_failed_rollouts``: the ``skyrl`` adapter with SkyRL's
``generator.skip_failed_rollouts`` on (NovaSky-AI/SkyRL PR #1986), everything else as ``skyrl``.

A target of its own, not a setting a scenario names, because the flag is the trainer's
configuration for a whole run, as a user would set it; on a SkyRL tree without the setting the
target is a usage error at session start. ``rollout-chaos gate --target skyrl --head-target
skyrl_skip_failed_rollouts`` compares the PR's base as users run it with the PR's head as a user
who turns the flag on runs it.
"""

from __future__ import annotations

from pytest_rollout_chaos.collector.adapters.skyrl import (
    GYM_CLIENT,
    SkipFailedRolloutsCollector,
)
from pytest_rollout_chaos.collector.adapters.skyrl_upstream import (
    UPSTREAM_SKIP_FAILED as UPSTREAM,
)

factory = SkipFailedRolloutsCollector

__all__ = ["GYM_CLIENT", "UPSTREAM", "factory"]
