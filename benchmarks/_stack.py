"""Starting and stopping stacks for the benchmarks, and timing each start.

``running_stack`` is the stack the ``chaos_stack`` fixture builds, through the same builder (tiny
policy, Toxiproxy, the fault layer, the Gym stack with a proxy and a layer listener on every link).
The pieces below build the variants the overhead benchmarks compare it with (the same Gym stack
wired straight to its upstreams, or through the fault layer only). Every process goes to a
``ProcessKeeper``, so it is stopped on every path.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.builder import StackBuilder
from pytest_rollout_chaos.servers.faultlayer.spec import NAME as FAULT_LAYER_NAME
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer, fault_layer_spec
from pytest_rollout_chaos.servers.gym.stack import (
    GymStack,
    Link,
    direct_link,
    eos_token_id,
    start_gym_stack,
)
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.servers.links import ProxyLinks
from pytest_rollout_chaos.servers.policy.spec import DEFAULT_SERVED_MODEL_NAME, PolicyServer, tiny_policy_spec
from pytest_rollout_chaos.servers.toxiproxy.handle import ChaosToxiproxy
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stack import ChaosStack


def starter(exit_stack: contextlib.ExitStack, log_dir: Path) -> ProcessKeeper:
    """A ``ProcessKeeper`` writing logs to ``log_dir``, closed with ``exit_stack``; it keeps each
    server's start time (``started_s``)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    return exit_stack.enter_context(ProcessKeeper(log_dir))


def start_policy(start: ProcessKeeper, *, seed: int = 0) -> PolicyServer:
    """The tiny policy server, writing its History events next to its log."""
    model_dir = bundled.tiny_model_dir()
    events = start.log_dir / "policy.events.jsonl"
    process = start.start(tiny_policy_spec(model_dir, seed=seed, events_file=events))
    return PolicyServer.of(process, model=DEFAULT_SERVED_MODEL_NAME, model_dir=model_dir, backend="tiny")


def start_fault_layer(start: ProcessKeeper) -> FaultLayer:
    """The HTTP fault layer, recording every link into its events file next to its log."""
    events = start.log_dir / f"{FAULT_LAYER_NAME}.events.jsonl"
    return FaultLayer(start.start(fault_layer_spec(events)).url, events)


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


def start_gym(start: ProcessKeeper, policy: PolicyServer, *, proxied_by: Link | None = None) -> GymStack:
    """A Gym stack in front of ``policy``; through ``proxied_by``'s links (``ProxyLinks``,
    ``LayerLinks``) when given."""
    return _gym(start, policy, proxied_by if proxied_by is not None else direct_link)


def stack_of(
    policy: PolicyServer,
    gym: GymStack,
    *,
    toxiproxy: ChaosToxiproxy | None = None,
    fault_layer: FaultLayer | None = None,
    links: ProxyLinks | None = None,
    collector_policy_url: str | None = None,
) -> ChaosStack:
    """A ``ChaosStack`` over servers started piecemeal, for ``_collect.collect``'s trial; the
    collector reaches the policy at ``collector_policy_url``, directly when it is not given."""
    return ChaosStack(
        policy=policy,
        gym=gym,
        toxiproxy=toxiproxy,
        links=links.links if links is not None else {},
        fault_layer=fault_layer,
        collector_policy_url=collector_policy_url or policy.base_url,
    )


def _gym(start: ProcessKeeper, policy: PolicyServer, link: Link) -> GymStack:
    return start_gym_stack(
        start.start,
        start.log_dir,
        policy_url=policy.url,
        model=policy.model,
        eos_token_id=eos_token_id(policy.model_dir),
        link=link,
    )
