"""Real servers for the Gym integration tests: the session's tiny policy, one Gym stack per module."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pytest_rollout_chaos.builder import GymShape, StackBuilder
from pytest_rollout_chaos.servers.gym.stack import GymStack, Link, direct_link
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.settings import ChaosSettings


@contextlib.contextmanager
def running_stack(
    log_dir: Path, policy: PolicyServer, *, splice: bool, link: Link = direct_link
) -> Iterator[GymStack]:
    """A whole Gym stack in front of ``policy`` (built by the one stack builder), stopped on every path."""
    with ProcessKeeper(log_dir) as keeper:
        builder = StackBuilder(
            ChaosSettings(), keeper, external_policy=policy, links=link, gym=GymShape(splice=splice)
        )
        yield builder.gym
