"""Starting and stopping whole stacks for the benchmarks, and timing each start.

``running_stack`` builds what the ``chaos_stack`` fixture builds (tiny policy, Toxiproxy, the
fault layer, the Gym stack with a proxy and a layer listener on every link) or, with
``proxied=False``, the same Gym stack wired straight to its upstreams. Every process goes on one
ExitStack, so it is stopped on every path.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.servers.faultlayer.spec import NAME as FAULT_LAYER_NAME
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer, fault_layer_spec
from pytest_rollout_chaos.servers.gym.stack import (
    GymStack,
    Link,
    direct_link,
    eos_token_id,
    start_gym_stack,
)
from pytest_rollout_chaos.servers.links import COLLECTOR_TO_POLICY, ProxyLinks
from pytest_rollout_chaos.servers.policy.spec import DEFAULT_SERVED_MODEL_NAME, PolicyServer, tiny_policy_spec
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.servers.toxiproxy.controller import start_embedded
from pytest_rollout_chaos.servers.toxiproxy.handle import ChaosToxiproxy
from pytest_rollout_chaos.stack import ChaosStack


@dataclass
class Starter:
    """Starts specs into ``log_dir``, registers their stop on ``exit_stack``, and keeps each start
    time and process (by the spec's name)."""

    exit_stack: contextlib.ExitStack
    log_dir: Path
    started_s: dict[str, float] = field(default_factory=dict)
    processes: dict[str, ManagedProcess] = field(default_factory=dict)

    def __call__(self, spec: ServerSpec) -> ManagedProcess:
        process = ManagedProcess(spec, self.log_dir)
        self.exit_stack.callback(process.stop)
        began = time.perf_counter()
        process.start()
        self.started_s[spec.name] = time.perf_counter() - began
        self.processes[spec.name] = process
        return process


def start_policy(start: Starter, *, seed: int = 0) -> PolicyServer:
    """The tiny policy server, writing its History events next to its log."""
    model_dir = bundled.tiny_model_dir()
    events = start.log_dir / "policy.events.jsonl"
    process = start(tiny_policy_spec(model_dir, seed=seed, events_file=events))
    return PolicyServer.of(process, model=DEFAULT_SERVED_MODEL_NAME, model_dir=model_dir, backend="tiny")


def start_fault_layer(start: Starter) -> FaultLayer:
    """The HTTP fault layer, recording every link into its events file next to its log."""
    events = start.log_dir / f"{FAULT_LAYER_NAME}.events.jsonl"
    return FaultLayer(start(fault_layer_spec(events)).url, events)


@dataclass(frozen=True, slots=True)
class TimedStack:
    """A running stack and how long its start took, in total and per server."""

    stack: ChaosStack
    start_s: float
    per_server_s: dict[str, float]


@contextlib.contextmanager
def running_stack(log_dir: Path, *, proxied: bool = True, seed: int = 0) -> Iterator[TimedStack]:
    """The whole system under test as ``chaos_stack`` builds it; everything stopped on exit."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as exit_stack:
        start = Starter(exit_stack, log_dir)
        began = time.perf_counter()
        policy = start_policy(start, seed=seed)
        toxiproxy = ChaosToxiproxy(start_embedded(start, seed=seed))
        fault_layer = start_fault_layer(start)
        links = ProxyLinks(toxiproxy.api_url, fault_layer.url)
        link: Link = links if proxied else direct_link
        gym = _gym(start, policy, link)
        collector_policy_url = link(COLLECTOR_TO_POLICY, policy.base_url)
        elapsed_s = time.perf_counter() - began
        stack = ChaosStack(
            policy=policy,
            gym=gym,
            toxiproxy=toxiproxy,
            links=links.links,
            fault_layer=fault_layer,
            collector_policy_url=collector_policy_url,
        )
        yield TimedStack(stack, elapsed_s, dict(start.started_s))


def start_gym(start: Starter, policy: PolicyServer, *, proxied_by: Link | None = None) -> GymStack:
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


def _gym(start: Starter, policy: PolicyServer, link: Link) -> GymStack:
    return start_gym_stack(
        start,
        start.log_dir,
        policy_url=policy.url,
        model=policy.model,
        eos_token_id=eos_token_id(policy.model_dir),
        link=link,
    )
