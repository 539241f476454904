"""ChaosStack: the whole system under test as scenarios address it, and its per-test reset.

It joins the session's policy server, Gym stack and Toxiproxy under the names the scenario
format uses: servers ``policy``, ``model``, ``resources``, ``head`` and each agent instance
(``agent`` means all of them), and links ``model->policy``, ``agent->model``,
``agent->resources``, ``collector->resources`` and ``collector->agent`` (one proxy per agent
instance), ``collector->policy``. Every link runs through the fault layer (recording, semantic
faults) behind a Toxiproxy proxy (TCP faults). ``reset`` puts everything back the way a scenario
expects to find it: every proxy enabled without toxics, no fault rule armed and no row known to
the layer, server state reset, every server running.

A stack wired without Toxiproxy or without the fault layer (the collector integration tests,
the benchmarks' direct stacks) has None there: network faults, or semantic faults, then say
that they have nothing to act through.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_rollout_chaos.servers.faultlayer import client as layer
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer
from pytest_rollout_chaos.servers.gym.stack import (
    COLLECTOR_TO_AGENT,
    HEAD_NAME,
    MODEL_NAME,
    RESOURCES_NAME,
    GymStack,
)
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy.handle import ChaosToxiproxy

_logger = logging.getLogger(__name__)

AGENTS_ALIAS = "agent"
_SERVER_ALIASES: Mapping[str, str] = {"model": MODEL_NAME, "resources": RESOURCES_NAME, "head": HEAD_NAME}


@dataclass(frozen=True)
class ChaosStack:
    """The running system, addressed by scenario names."""

    policy: PolicyServer
    gym: GymStack
    toxiproxy: ChaosToxiproxy | None
    links: Mapping[str, str]  # link name -> Toxiproxy proxy name
    fault_layer: FaultLayer | None
    collector_policy_url: str  # the policy's OpenAI base URL through the collector->policy link

    @property
    def agent_names(self) -> tuple[str, ...]:
        return tuple(self.gym.agents)

    def servers(self) -> dict[str, ManagedProcess]:
        """Scenario server names (and the processes' own names) -> processes this run started.

        An external policy (``--rollout-chaos-policy-url``) is no process of ours: see ``unmanaged``.
        """
        named: dict[str, ManagedProcess] = {}
        if self.policy.process is not None:
            named["policy"] = self.policy.process
        named.update(self.gym.processes)
        for alias, actual in _SERVER_ALIASES.items():
            named[alias] = self.gym.processes[actual]
        return named

    def placement(self) -> dict[str, str]:
        """Server name -> the Ray node it runs on (``--rollout-chaos-ray``); empty when all run here."""
        return {
            name: where for name, process in self.servers().items() if (where := process.node()) is not None
        }

    def unmanaged(self) -> dict[str, str]:
        """Scenario server names this run did not start -> why no process fault can act on them."""
        reason = self.policy.unmanaged_reason()
        return {"policy": reason} if reason is not None else {}

    def expand_target(self, target: str) -> tuple[str, ...]:
        """``agent`` and ``collector->agent`` stand for every agent instance; others for themselves."""
        if target == AGENTS_ALIAS:
            return self.agent_names
        if target == COLLECTOR_TO_AGENT:
            return tuple(f"{COLLECTOR_TO_AGENT}:{agent}" for agent in self.agent_names)
        return (target,)

    def events_files(self) -> list[Path]:
        """Every server's History events file, and the fault layer's."""
        layer = [self.fault_layer.events_file] if self.fault_layer is not None else []
        return [*self.gym.events_files, *layer, *self.policy.events_files()]

    def reset(self, *, env_latency_ms_per_call: float = 0.0, env_latency_ms_per_item: float = 0.0) -> None:
        """Undo whatever the last test left: restart dead servers, clear toxics and fault rules."""
        for process in _unique(self.servers().values()):
            if not process.is_running():
                _logger.warning("server %r was down before the test; restarting it", process.name)
                process.restart()
        if self.toxiproxy is not None:
            self.toxiproxy.reset()
        if self.fault_layer is not None:
            layer.reset(self.fault_layer.url)
        self.gym.reset_state()
        if env_latency_ms_per_call or env_latency_ms_per_item:
            self.gym.set_env_latency(per_call_ms=env_latency_ms_per_call, per_item_ms=env_latency_ms_per_item)


def _unique(processes: Iterable[ManagedProcess]) -> list[ManagedProcess]:
    """Each process once (aliases name the same process twice)."""
    seen: dict[int, ManagedProcess] = {}
    for process in processes:
        seen.setdefault(id(process), process)
    return list(seen.values())
