"""The facts the fit step's rules read (``engine.fit``), gathered once before any rule runs: what
a stack is (``StackFacts``) and where each of a scenario's fault steps acts (``StepFacts``, once the
collector's retargets have moved it, and, given a stack's targets, the servers it stands for).
The rules then ask nothing of the stack, the fault classes or the replica names about them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_rollout_chaos import acting
from pytest_rollout_chaos.engine import retarget
from pytest_rollout_chaos.faults import registry as faults
from pytest_rollout_chaos.faults.base import Need
from pytest_rollout_chaos.scenario.model import FaultStep, Trigger
from pytest_rollout_chaos.servers.nemo_gym.stack import NemoGymStack
from pytest_rollout_chaos.servers.policy.replicas import replica_of
from pytest_rollout_chaos.stack import ChaosStack, Targets


@dataclass(frozen=True, slots=True)
class StackFacts:
    """What the rules read of a stack, gathered once (``stack_facts``)."""

    started_replicas: int
    targets: Targets  # every policy replica started in use
    lacks: acting.Lacks
    unmanaged: Mapping[str, str]  # servers this run did not start -> why
    real_servers: frozenset[str]  # process names of real NeMo Gym servers
    relays: Mapping[str, str]  # agent -> its NeMo Gym legacy_agent relay (NeMo Gym 0.5 on)
    nemo_gym_version: str | None  # None: the embedded Gym servers
    pins_tool_calls: bool  # a started replica is real vLLM forcing each tool call's envelope


def stack_facts(stack: ChaosStack) -> StackFacts:
    """What the rules read of ``stack``."""
    gym = stack.gym
    return StackFacts(
        started_replicas=len(stack.started_replicas),
        targets=Targets(stack.agent_names, stack.policy_names(in_use=False)),
        lacks=acting.lacks(stack),
        unmanaged=stack.unmanaged(),
        real_servers=gym.real_servers,
        relays=gym.relays if isinstance(gym, NemoGymStack) else {},
        nemo_gym_version=gym.nemo_gym_version if isinstance(gym, NemoGymStack) else None,
        pins_tool_calls=any(replica.pins_tool_calls for replica in stack.started_replicas),
    )


@dataclass(frozen=True, slots=True)
class StepFacts:
    """What the rules read of one fault step where it acts (its collector's retargets and
    retriggers applied), gathered once (``step_facts``)."""

    index: int
    kind: str
    target: str
    route: str | None  # the route it aims at: its own, else its class's default (None: any)
    family: str  # its target, a policy replica (``policy[1]``) as ``policy``
    needs: tuple[Need, ...]  # what its fault class needs of its target's servers
    terminates: bool  # its fault ends the target's process (``terminates_target``)
    at: Trigger  # when it fires (an ``on_request`` trigger counts its server's requests)
    at_family: str | None  # the server its trigger counts (``on_request``), a replica as ``policy``
    servers: tuple[str, ...] = ()  # the servers its target stands for on the stack (none without one)
    beyond: str | None = None  # why its target stands for none there: a replica beyond those in use


def step_facts(faults_given: Sequence[FaultStep], targets: Targets | None = None) -> tuple[StepFacts, ...]:
    """What the rules read of each of ``faults_given`` (a scenario's fault steps); with ``targets``
    (a stack's, its replicas in use), the servers each one's target stands for there."""
    steps = []
    for index, step in enumerate(faults_given):
        route = retarget.aimed_route(step)
        fault = faults.fault_class(step.kind)
        servers: tuple[str, ...] = ()
        beyond = None
        if targets is not None:
            try:
                servers = targets.expand(step.target)
            except ValueError as error:  # ``policy[i]`` beyond the replicas in use
                beyond = str(error)
        steps.append(
            StepFacts(
                index,
                step.kind,
                step.target,
                route,
                replica_of(step.target)[0],
                tuple(fault.needs),
                bool(getattr(fault, "terminates_target", False)),
                step.at,
                replica_of(step.at.server)[0] if step.at.server else None,
                servers,
                beyond,
            )
        )
    return tuple(steps)
