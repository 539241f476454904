"""Starting and stopping stacks for the benchmarks, all through the one stack builder.

``running_stack`` is the stack the ``chaos_stack`` fixture builds (tiny policy, Toxiproxy, the
fault layer, the Gym stack with a proxy and a layer listener on every link), timed. ``builder``
gives the variants the overhead benchmarks compare it with: the same Gym stack in front of a
policy already running, wired straight to its upstreams or through the fault layer only. Every
process goes to a ``ProcessKeeper``, so it is stopped on every path.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_rollout_chaos.builder import LinkKind, StackBuilder
from pytest_rollout_chaos.servers.gym.stack import GymStack, Link
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack

SETTINGS = ChaosSettings(toxiproxy="embedded")


def builder(
    exit_stack: contextlib.ExitStack,
    log_dir: Path,
    *,
    policy: PolicyServer | None = None,
    links: LinkKind | Link = "proxied",
) -> StackBuilder:
    """A builder whose servers write their logs to ``log_dir`` and stop with ``exit_stack``; in
    front of ``policy`` when given (else it starts the tiny policy), its links made per ``links``.
    Its keeper has each server's start time (``started_s``)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    keeper = exit_stack.enter_context(ProcessKeeper(log_dir))
    return StackBuilder(SETTINGS, keeper, external_policy=policy, links=links)


def stack_of(policy: PolicyServer, gym: GymStack) -> ChaosStack:
    """A ``ChaosStack`` over a Gym stack and another policy server the collector reaches directly
    (the batched-validation benchmark gives each collector a fresh policy, seeded alike)."""
    return ChaosStack(
        policy=policy,
        gym=gym,
        toxiproxy=None,
        links={},
        fault_layer=None,
        collector_policy_url=policy.base_url,
    )


@dataclass(frozen=True, slots=True)
class TimedStack:
    """A running stack and how long its start took, in total and per server."""

    stack: ChaosStack
    start_s: float
    per_server_s: dict[str, float]


@contextlib.contextmanager
def running_stack(log_dir: Path, *, seed: int = 0) -> Iterator[TimedStack]:
    """The whole system under test, built as ``chaos_stack`` builds it (``builder.StackBuilder``,
    the embedded Toxiproxy); everything stopped on exit."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with ProcessKeeper(log_dir) as keeper:
        began = time.perf_counter()
        stack = StackBuilder(ChaosSettings(toxiproxy="embedded", seed=seed), keeper).stack
        yield TimedStack(stack, time.perf_counter() - began, dict(keeper.started_s))
