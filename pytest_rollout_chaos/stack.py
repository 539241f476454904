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

With several policy replicas (``--rollout-chaos-policy-replicas``) each is a server of its own,
``policy[0]``, ``policy[1]``, ..., behind its own link ``model->policy[i]``; ``policy`` and
``model->policy`` stand for every replica in use. A scenario may use fewer replicas than were
started (``stack.policy.replicas``): ``using(n)`` is the stack with the first n, which is all the
faults see; the model server is told to spread its calls over those only.

``policy_loading`` plays a policy that is still loading when the collection starts
(``stack.policy.ready_delay_s``): stopped, then restarted to come back only after that long.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.faultlayer import client as layer
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer
from pytest_rollout_chaos.servers.gym.stack import (
    COLLECTOR_TO_AGENT,
    HEAD_NAME,
    MODEL_NAME,
    RESOURCES_NAME,
    GymStack,
)
from pytest_rollout_chaos.servers.policy.replicas import POLICY, indexed_names, replica_names, replica_of
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
    replicas: tuple[PolicyServer, ...] = ()  # every policy replica started, ``policy`` first; () = (policy,)
    replicas_in_use: int = 0  # how many of them this scenario uses; 0: all
    gym_python: Path | None = None  # --rollout-chaos-gym-python, for a collector running NeMo Gym's code
    # brings here the logs and events of servers on machines that share no files with this one
    # (Ray nodes elsewhere, the hosts of hosts:N); None when every server writes here
    pull_files: Callable[[], None] | None = None

    @property
    def agent_names(self) -> tuple[str, ...]:
        return tuple(self.gym.agents)

    @property
    def started_replicas(self) -> tuple[PolicyServer, ...]:
        return self.replicas or (self.policy,)

    @property
    def samples_reproducibly(self) -> bool:
        """Whether a rerun of a scenario draws the same tokens: only the tiny policy seeds every
        unseeded request from the scenario's sequence (``reset``); vLLM and an external server
        sample from a generator batching reorders."""
        return all(replica.backend == "tiny" for replica in self.started_replicas)

    def policy_names(self, *, in_use: bool = True) -> tuple[str, ...]:
        """The server names of the policy replicas (in use): ``policy`` alone, or ``policy[i]`` each."""
        names = replica_names(len(self.started_replicas))
        return names[: self.replicas_in_use or None] if in_use else names

    def using(self, replicas: int) -> ChaosStack:
        """This stack with only its first ``replicas`` policy replicas in use (``ValueError`` beyond them)."""
        started = len(self.started_replicas)
        if not 1 <= replicas <= started:
            raise ValueError(f"{replicas} policy replicas asked of a stack that started {started}")
        return dataclasses.replace(self, replicas_in_use=replicas)

    def servers(self) -> dict[str, ManagedProcess]:
        """Scenario server names (and the processes' own names) -> processes this run started.

        An external policy (``--rollout-chaos-policy-url``) is no process of ours: see ``unmanaged``.
        """
        named: dict[str, ManagedProcess] = {}
        for name, replica in zip(self.policy_names(), self.started_replicas, strict=False):
            if replica.process is not None:
                named[name] = replica.process
        named.update(self.gym.processes)
        for alias, actual in _SERVER_ALIASES.items():
            named[alias] = self.gym.processes[actual]
        return named

    def process_names(self) -> dict[str, tuple[str, ...]]:
        """Each name scenarios and events give a server this run started (``agent`` and ``policy``
        for every one of theirs) -> the names of the processes behind it, whose logs are theirs."""
        named: dict[str, tuple[str, ...]] = {
            name: (process.name,) for name, process in self.servers().items()
        }
        for alias, names in ((AGENTS_ALIAS, self.agent_names), (POLICY, self.policy_names())):
            named[alias] = tuple(named[name][0] for name in names if name in named)
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
        """The server names ``target`` stands for (``Targets.expand``)."""
        return self.targets().expand(target)

    def targets(self) -> Targets:
        """The names this stack's target aliases stand for: its agents, its policy replicas in use."""
        return Targets(self.agent_names, self.policy_names())

    def events_files(self) -> list[Path]:
        """Every server's History events file, and the fault layer's."""
        layer = list(self.fault_layer.events_files) if self.fault_layer is not None else []
        policies = [path for replica in self.started_replicas for path in replica.events_files()]
        return [*self.gym.events_files, *layer, *policies]

    def reset(
        self,
        *,
        env_latency_ms_per_call: float = 0.0,
        env_latency_ms_per_item: float = 0.0,
        policy_seed: int | None = None,
    ) -> None:
        """Undo whatever the last test left: restart dead servers, clear toxics and fault rules; give
        the tiny policy's unseeded requests seeds from ``policy_seed``, or from the session's sequence
        where the last seeded scenario left it (None)."""
        started = [replica.process for replica in self.started_replicas if replica.process is not None]
        for process in _unique([*self.servers().values(), *started]):
            if not process.is_running():
                _logger.warning("server %r was down before the test; restarting it", process.name)
                process.restart()
        if self.toxiproxy is not None:
            self.toxiproxy.reset()
        if self.fault_layer is not None:
            layer.reset(self.fault_layer.url)
        self.gym.reset_state()
        if self.replicas_in_use and self.replicas_in_use < len(self.started_replicas):
            self.gym.use_policy_replicas(self.replicas_in_use)
        if env_latency_ms_per_call or env_latency_ms_per_item:
            self.gym.set_env_latency(per_call_ms=env_latency_ms_per_call, per_item_ms=env_latency_ms_per_item)
        for replica in self.started_replicas:
            if replica.backend == "tiny":
                replica.reseed(policy_seed)

    async def policy_loading(self, ready_delay_s: float, history: History) -> asyncio.Task[None] | None:
        """``stack.policy.ready_delay_s``: the policy is stopped and comes back only after that long,
        refusing connections meanwhile, as a model server does while it loads; the collection starts
        right away (the NeMo Skills pipeline case). Returns the restart under way (None without a
        delay)."""
        if ready_delay_s <= 0:
            return None
        process = self.policy.process
        if process is None:  # the fit step turns such a scenario away before it gets here
            raise FaultError(f"stack.policy.ready_delay_s: {self.policy.unmanaged_reason()}")
        await asyncio.to_thread(process.stop)
        history.append("process", "info", "loading", {"server": process.name, "ready_delay_s": ready_delay_s})
        return asyncio.create_task(asyncio.to_thread(process.restart, ready_delay_s=ready_delay_s))


@dataclass(frozen=True, slots=True)
class Targets:
    """What a stack's target aliases stand for: ``agent`` and ``collector->agent`` every agent
    instance, ``policy`` and ``model->policy`` every policy replica in use, ``policy[i]`` that
    replica's own name (``policy`` when only one was started); others themselves."""

    agents: tuple[str, ...]
    policies: tuple[str, ...]

    def expand(self, target: str) -> tuple[str, ...]:
        """The server names ``target`` stands for; ``ValueError`` for a replica beyond them."""
        if target == AGENTS_ALIAS:
            return self.agents
        if target == COLLECTOR_TO_AGENT:
            return tuple(f"{COLLECTOR_TO_AGENT}:{agent}" for agent in self.agents)
        base, index = replica_of(target)
        head, arrow, end = base.rpartition("->")
        if end != POLICY:
            return (target,)
        names = self.policies
        if index is None:
            return tuple(f"{head}{arrow}{name}" for name in names)
        if index >= len(names):
            valid = ", ".join((POLICY, *indexed_names(len(names))))
            raise ValueError(f"{target!r}: this stack runs {len(names)} policy replica(s) (valid: {valid})")
        return (f"{head}{arrow}{names[index]}",)

    def using(self, replicas: int) -> Targets:
        """These targets with only the first ``replicas`` policy replicas in use."""
        return dataclasses.replace(self, policies=self.policies[:replicas])


def _unique(processes: Iterable[ManagedProcess]) -> list[ManagedProcess]:
    """Each process once (aliases name the same process twice)."""
    seen: dict[int, ManagedProcess] = {}
    for process in processes:
        seen.setdefault(id(process), process)
    return list(seen.values())
