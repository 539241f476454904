"""The fit step: can this scenario run on this stack with this collector? Facts first, then rules.

Every fact the answer needs is gathered before any scenario is looked at, and nothing below this
module is asked anything about the scenario:

- **the collector's declared abilities** (``abilities.declared``): styles, modes, the pairs of them
  it cannot combine, the largest group it takes, whether it numbers the rows itself, the most
  collections it runs in a row, its reach, its retargets and what it does not move (``unmoved``);
- **the stack** (``StackFacts``): the policy replicas started, what its target aliases stand for
  (``stack.Targets``), what each server lacks of the needs a fault may have (``acting.lacks``: a
  process fault needs a server this run started, a Ray fault an actor), which servers are real
  NeMo Gym's, its relays, whether real vLLM pins tool calls, what this run did not start.

The rules then read only those facts and the scenario. The collector's, which need no stack, are
``engine.collector_fit``'s (its styles and modes, groups, collections, row numbering, the stack
settings its loop never meets, its reach). The stack's are here: the policy replicas the scenario
asks for (``replicas_unmet``); what each fault needs of its target; real NeMo Gym's resources
server scoring by the answer alone (``stack.rescore_bonus``, ``stack.reward_spread``); a server
exit that cannot reach the collector (``hidden_exit``); the model's own drift that real vLLM's
strict tool calling prevents (``drift_prevented``); stop strings where our model server does not
generate (``stop_unset``); a policy restart on a policy this run did not start. A scenario's faults
are first moved as the collector's ``retargets`` say (``engine.retarget``): what is checked is where
each fault will act.

Nothing here raises a skip: a runner turns the reason into one (``errors.CannotRunHere``, which
pytest's scenario item reports as a skip), so the engine runs under any runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from pytest_rollout_chaos import acting
from pytest_rollout_chaos.collector import abilities
from pytest_rollout_chaos.collector.abilities import Abilities
from pytest_rollout_chaos.engine import collector_fit, retarget
from pytest_rollout_chaos.faults import registry as faults
from pytest_rollout_chaos.invariants import registry as invariants
from pytest_rollout_chaos.scenario.model import Scenario
from pytest_rollout_chaos.servers.gym.stack import MODEL_NAME, RESOURCES_NAME
from pytest_rollout_chaos.servers.nemo_gym.stack import NemoGymStack
from pytest_rollout_chaos.stack import ChaosStack, Targets

DRIFT_WITNESS: Final = "prompt_ids_drifted"


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
class Fit:
    """The fit step's answer: the policy replicas and the faults the scenario runs with, or why not."""

    replicas: int  # the policy replicas it uses (``ChaosStack.using``)
    retargeted: retarget.Retargeted  # its faults where they act for the collector
    reason: str | None = None


def why_not(scenario: Scenario, stack: ChaosStack, collector: object, *, run_replicas: int) -> str | None:
    """Why ``scenario`` cannot run on ``stack`` with ``collector`` (its factory, its class or the
    collector built), or None. ``run_replicas`` is the run's ``--rollout-chaos-policy-replicas``."""
    return fitted(
        scenario, stack_facts(stack), abilities.declared(collector), run_replicas=run_replicas
    ).reason


def fitted(scenario: Scenario, stack: StackFacts, declared: Abilities, *, run_replicas: int) -> Fit:
    """``why_not`` from the facts, with what the scenario runs with: its policy replicas, and its
    faults moved where they act for the collector (worked out once, here)."""
    moved = retarget.retarget(scenario, declared.retargets)
    wanted = scenario.stack.policy.replicas or run_replicas
    reason = (
        replicas_unmet(scenario, stack, wanted)
        or stack_unfit(moved.scenario, stack, stack.targets.using(wanted))
        or collector_fit.unfit(moved.scenario, declared)
    )
    return Fit(wanted, moved, reason)


def replicas_unmet(scenario: Scenario, stack: StackFacts, wanted: int) -> str | None:
    """Why ``stack`` cannot run ``wanted`` policy replicas (``scenario``'s ``stack.policy.replicas``,
    else the run's), or None.

    The embedded model server can spread its calls over fewer replicas than were started; real
    NeMo Gym was given its list of base URLs at start, and an external policy is one server.
    """
    started = stack.started_replicas
    if wanted == started:
        return None
    source = "stack.policy.replicas" if scenario.stack.policy.replicas else "--rollout-chaos-policy-replicas"
    asked = f"{wanted} policy replica(s) ({source})"
    if "policy" in stack.unmanaged:
        return f"the scenario needs {asked}; {stack.unmanaged['policy']}, and only it"
    if wanted > started:
        return (
            f"the scenario needs {asked}; this run started {started} "
            f"(--rollout-chaos-policy-replicas={wanted} starts them)"
        )
    if MODEL_NAME in stack.real_servers:
        return (
            f"the scenario needs {asked}; this run started {started}, and real NeMo Gym's model server "
            f"was given all their base URLs at start (run it with --rollout-chaos-policy-replicas={wanted})"
        )
    return None


def not_applicable(scenario: Scenario, stack: ChaosStack) -> str | None:
    """Why ``scenario`` cannot run on ``stack`` (its replicas in use), whatever the collector, or None."""
    return stack_unfit(scenario, stack_facts(stack), stack.targets())


def stack_unfit(scenario: Scenario, stack: StackFacts, targets: Targets) -> str | None:
    """Why ``scenario`` cannot run on a stack with ``stack``'s facts and ``targets`` in use,
    whatever the collector, or None.

    Semantic faults act from the fault layer in front of every server and the layer records
    every request, so no scenario needs anything inside a server. What a fault needs is its
    class's to say (``Fault.needs``).
    """
    servers: dict[str, tuple[str, ...]] = {}
    for index, step in enumerate(scenario.faults):
        try:
            servers[step.target] = targets.expand(step.target)
        except ValueError as error:  # ``policy[i]`` beyond the replicas in use
            return f"faults/{index} {step.kind} on {step.target!r}: {error}"
        why = stack.lacks.why(servers[step.target], faults.fault_class(step.kind).needs)
        if why is not None:
            return f"faults/{index} {step.kind} on {step.target!r}: {why}"
    if scenario.workload.style == "gym" and RESOURCES_NAME in stack.real_servers:
        if scenario.stack.rescore_bonus:
            return (
                f"stack.rescore_bonus={scenario.stack.rescore_bonus:g} needs our resources server to answer "
                "/verify; real NeMo Gym's (equivalence_rule) scores every attempt of a row alike"
            )
        if scenario.stack.reward_spread:
            return (
                f"stack.reward_spread={scenario.stack.reward_spread:g} needs our resources server to answer "
                "/verify; real NeMo Gym's (equivalence_rule) scores by the answer alone"
            )
    reason = (
        hidden_exit(scenario, stack, servers)
        or drift_prevented(scenario, stack)
        or stop_unset(scenario, stack)
    )
    if reason is not None:
        return reason
    delay_s = scenario.stack.policy.ready_delay_s
    if delay_s > 0 and "policy" in stack.unmanaged:
        why = stack.unmanaged["policy"]
        return f"stack.policy.ready_delay_s={delay_s:g} stops and restarts the policy: {why}"
    return None


def stop_unset(scenario: Scenario, stack: StackFacts) -> str | None:
    """Why the stop strings ``scenario`` asks for (``stack.policy.stop``) cannot be set on ``stack``,
    or None. The embedded model server adds them to the generations of gym style's agents; the native
    style generates from the policy itself, and real NeMo Gym's ``vllm_model`` reads its
    ``extra_body`` at start only."""
    stop = scenario.stack.policy.stop
    if not stop:
        return None
    if scenario.workload.style == "native":
        return (
            f"stack.policy.stop={list(stop)!r} is set in the Gym model server, and native style "
            "generates from the policy without it"
        )
    if MODEL_NAME in stack.real_servers:
        return (
            f"stack.policy.stop={list(stop)!r} needs our model server to take extra sampling fields per "
            "test; real NeMo Gym's vllm_model reads its extra_body from its config at start"
        )
    return None


def hidden_exit(scenario: Scenario, stack: StackFacts, servers: Mapping[str, tuple[str, ...]]) -> str | None:
    """Why a server exit ``scenario`` judges the collector's answer to cannot reach it, or None
    (``servers``: what each fault's target stands for).

    An invariant that judges how the collector answers a server going down (``judges_exits``:
    ``outage_fails_collection``) judges something only where that exit reaches the collector. From
    NeMo Gym 0.5 on the collector meets each agent only through its ``legacy_agent`` relay, which
    retries a refused agent without limit (``nemo_gym.server_utils``, ``_internal=True``): a killed
    agent then looks to any collector exactly like a frozen one.
    """
    relays = stack.relays
    judging = [
        name
        for name in scenario.expect.invariants
        if getattr(invariants.BY_NAME.get(name), "judges_exits", False)
    ]
    if not relays or not judging:
        return None
    for index, step in enumerate(scenario.faults):
        if not getattr(faults.fault_class(step.kind), "terminates_target", False):
            continue
        for server in servers[step.target]:
            if server in relays:
                return (
                    f"faults/{index} {step.kind} on {server!r}: {', '.join(judging)} judges how the "
                    f"collector answers {server}'s exit, and on NeMo Gym {stack.nemo_gym_version} "
                    f"the collector reaches {server} only through its legacy_agent relay "
                    f"{relays[server]!r}, which retries a dead agent without limit: the exit reaches "
                    "no collector, and the outage looks like a hang (run it on the embedded servers "
                    "or NeMo Gym 0.4)"
                )
    return None


def drift_prevented(scenario: Scenario, stack: StackFacts) -> str | None:
    """Why the model's own drift that ``scenario`` waits for cannot happen on ``stack``, or None.

    A scenario with no fault that re-renders prompts (``stack.policy.splice_prefix: false``) and
    witnesses ``prompt_ids_drifted`` waits for the model to write a tool call the chat template
    re-renders differently. Real vLLM behind NeMo Gym's ``vllm_model`` (its chat path) makes that
    rare: with strict tool calling, on by default since vLLM added it, the Hermes parser's
    structural tag forces each call's envelope exactly as the template writes it, and only
    whitespace inside the arguments can still differ (about one row in sixty with the tiny model).
    The faults that drift prompts in the network path (``prefix_drift``) act on every stack.
    """
    waits_for_the_model = (
        not scenario.faults
        and not scenario.stack.policy.splice_prefix
        and DRIFT_WITNESS in scenario.expect.witness
    )
    if not waits_for_the_model or stack.nemo_gym_version is None or not stack.pins_tool_calls:
        return None
    return (
        f"expect.witness {DRIFT_WITNESS} waits for the model's own tool-call JSON to drift, and real vLLM's "
        "strict tool calling forces each Hermes tool call's envelope as the chat template writes it, so "
        "behind NeMo Gym's vllm_model it almost never does (set VLLM_ENFORCE_STRICT_TOOL_CALLING=0 for the "
        "policy to run it; policy-tokenize-drift drifts prompts on this stack)"
    )
