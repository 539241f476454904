"""The fit step: can this scenario run on this stack with this collector? One function answers it.

``why_not`` returns why not (or None) from three kinds of fact, all known before anything runs:

- **the stack.** The policy replicas the scenario asks for (``with_replicas``); what each fault
  needs of its target (``acting.cannot_act``: a process fault needs a server this run started, a
  Ray fault an actor); real NeMo Gym's resources server scoring by the answer alone
  (``stack.rescore_bonus``, ``stack.reward_spread``); a server exit that cannot reach the
  collector (``hidden_exit``); the model's own drift that real vLLM's strict tool calling prevents
  (``drift_prevented``); a policy restart (``ready_delay_s``) on a policy this run did not start;
  stop strings (``stack.policy.stop``) where our model server does not generate (``stop_unset``).
- **the collector's declared abilities** (``collector.abilities``): styles, modes, the pairs of
  them it cannot combine, the largest group it takes, whether it numbers the rows itself, the
  most collections it runs in a row, the stack settings its loop never meets (``unmoved``).
- **its reach.** A collector that runs its own loop declares ``reaches``; a fault aimed elsewhere,
  or at a route it never requests, would never fire (``abilities.unreached``), and stop strings
  set in the model server would never reach its generations. Its faults are
  first moved as the collector's ``retargets`` say (``engine.retarget``): what is checked, here
  and against the stack, is where each fault will act.

One finer answer leaves the scenario running: ``inapplicable`` names the invariants that do not
apply to the collector by what it declares (``concurrency_bounded`` to one keeping its own
concurrency), each with why; the engine reports each as NOT_JUDGED with that reason, unrun, and a
scenario listing it is not vacuous for it, while the other invariants judge the run.

Nothing here raises a skip: a runner turns the reason into one (``errors.CannotRunHere``, which
pytest's scenario item reports as a skip), so the engine runs under any runner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pytest_rollout_chaos import acting
from pytest_rollout_chaos.collector import abilities
from pytest_rollout_chaos.collector.abilities import Reach
from pytest_rollout_chaos.engine import retarget
from pytest_rollout_chaos.faults import registry as faults
from pytest_rollout_chaos.invariants import registry as invariants
from pytest_rollout_chaos.invariants.concurrency_bounded import ConcurrencyBounded
from pytest_rollout_chaos.scenario.model import FaultStep, Scenario
from pytest_rollout_chaos.servers.gym.stack import MODEL_NAME, RESOURCES_NAME
from pytest_rollout_chaos.servers.nemo_gym.stack import NemoGymStack
from pytest_rollout_chaos.stack import ChaosStack

DRIFT_WITNESS: Final = "prompt_ids_drifted"


@dataclass(frozen=True, slots=True)
class Fit:
    """The fit step's answer: the stack and the faults as the scenario runs with them, or why not."""

    stack: ChaosStack  # narrowed to the scenario's policy replicas
    retargeted: retarget.Retargeted  # its faults where they act for the collector
    reason: str | None = None


def why_not(scenario: Scenario, stack: ChaosStack, collector: object, *, run_replicas: int) -> str | None:
    """Why ``scenario`` cannot run on ``stack`` with ``collector`` (its factory, its class or the
    collector built), or None. ``run_replicas`` is the run's ``--rollout-chaos-policy-replicas``."""
    return fitted(scenario, stack, collector, run_replicas=run_replicas).reason


def fitted(scenario: Scenario, stack: ChaosStack, collector: object, *, run_replicas: int) -> Fit:
    """``why_not``, with what the scenario runs with: ``stack`` narrowed to its policy replicas, and
    its faults moved where they act for ``collector`` (worked out once, here)."""
    moved = retarget.retarget(scenario, collector)
    narrowed, reason = with_replicas(scenario, stack, run_replicas)
    reason = reason or not_applicable(moved.scenario, narrowed) or unfit(moved.scenario, collector)
    return Fit(narrowed, moved, reason)


def collector_unfit(scenario: Scenario, collector: object) -> str | None:
    """Why ``collector`` cannot run ``scenario`` by what it declares, or None (no stack needed: a
    scenario the collector cannot express says so before the stack starts). Its faults are judged
    where the collector's ``retargets`` move them."""
    acting_here = retarget.retargeted(scenario, collector)
    return unfit(acting_here, collector)


def unfit(scenario: Scenario, collector: object) -> str | None:
    """``collector_unfit`` of a scenario whose faults the collector's retargets have moved already."""
    workload = scenario.workload
    aimed = [retarget.aimed_route(step) for step in scenario.faults]  # the registry's default where not given
    reason = abilities.unsupported(
        collector,
        style=workload.style,
        mode=workload.mode,
        group_size=workload.generations_per_prompt,
        row_ids=workload.row_ids,
        collections=workload.collections,
    )
    if reason is not None:
        return reason
    reason = setting_unmet(scenario, collector)
    if reason is not None:
        return reason
    reach = abilities.declared_reach(collector)
    if reach is None:
        return None
    stop = scenario.stack.policy.stop
    if stop and abilities.unreached(reach, "model", None) is not None:  # the scenarios' name for it
        return (
            f"stack.policy.stop={list(stop)!r} cannot reach the collector under test: it is set in the "
            "Gym model server, and the collector's own loop generates without it (its requests go to "
            f"{', '.join(reach)} only)"
        )
    for index, (step, route) in enumerate(zip(scenario.faults, aimed, strict=True)):
        why = abilities.unreached(reach, step.target, route)
        if why is not None:
            calls = ", ".join(
                target + (f" ({', '.join(routes)})" if routes else "") for target, routes in reach.items()
            )
            unmoved = abilities.unmoved_why(collector, step.kind, step.target)
            return (
                f"faults/{index} {step.kind} cannot reach the collector under test: {why}; the "
                f"collector's own requests go to {calls} only"
            ) + (f"; not moved to them: {unmoved}" if unmoved else "")
    return None


def setting_unmet(scenario: Scenario, collector: object) -> str | None:
    """Why ``collector``'s loop never meets what a stack setting ``scenario`` changes does (its
    ``unmoved``, by setting), or None: the model server re-rendering every turn, the verifier
    scoring a row higher each time it scores it again."""
    changed = {
        "stack.policy.splice_prefix": "false" if not scenario.stack.policy.splice_prefix else None,
        "stack.rescore_bonus": f"{scenario.stack.rescore_bonus:g}" if scenario.stack.rescore_bonus else None,
    }
    for setting, value in changed.items():
        why = abilities.unmoved_setting_why(collector, setting) if value is not None else None
        if why is not None:
            return f"{setting}: {value} has no counterpart in the collector under test: {why}"
    return None


def inapplicable(collector: object) -> dict[str, str]:
    """The invariants that do not apply to ``collector`` (the collector built) by what it declares,
    each with why; empty when all do."""
    own = abilities.own_concurrency(collector)
    if own is None:
        return {}
    return {
        ConcurrencyBounded.name: (
            "not applicable: the collector under test keeps its own concurrency, not "
            f"settings.max_concurrency (workload.max_concurrency): {own} (its own_concurrency)"
        )
    }


def with_replicas(scenario: Scenario, stack: ChaosStack, run_replicas: int) -> tuple[ChaosStack, str | None]:
    """The stack with the policy replicas ``scenario`` runs with (its ``stack.policy.replicas``, else
    the run's ``run_replicas``), or why it cannot have them.

    The embedded model server can spread its calls over fewer replicas than were started; real
    NeMo Gym was given its list of base URLs at start, and an external policy is one server.
    """
    wanted = scenario.stack.policy.replicas or run_replicas
    started = len(stack.started_replicas)
    if wanted == started:
        return stack, None
    source = "stack.policy.replicas" if scenario.stack.policy.replicas else "--rollout-chaos-policy-replicas"
    asked = f"{wanted} policy replica(s) ({source})"
    if "policy" in stack.unmanaged():
        return stack, f"the scenario needs {asked}; {stack.unmanaged()['policy']}, and only it"
    if wanted > started:
        return stack, (
            f"the scenario needs {asked}; this run started {started} "
            f"(--rollout-chaos-policy-replicas={wanted} starts them)"
        )
    if MODEL_NAME in stack.gym.real_servers:
        return stack, (
            f"the scenario needs {asked}; this run started {started}, and real NeMo Gym's model server "
            "was given all their base URLs at start (run it with --rollout-chaos-policy-replicas="
            f"{wanted})"
        )
    return stack.using(wanted), None


def not_applicable(scenario: Scenario, stack: ChaosStack) -> str | None:
    """Why ``scenario`` cannot run on ``stack``, whatever the collector, or None.

    Semantic faults act from the fault layer in front of every server and the layer records
    every request, so no scenario needs anything inside a server. What a fault needs is its
    class's to say (``Fault.needs``, checked by ``acting.cannot_act``).
    """
    for index, step in enumerate(scenario.faults):
        reason = acting.cannot_act(stack, step.kind, step.target)
        if reason is not None:
            return f"faults/{index} {step.kind} on {step.target!r}: {reason}"
    if scenario.workload.style == "gym" and RESOURCES_NAME in stack.gym.real_servers:
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
    hidden = hidden_exit(scenario, stack) or drift_prevented(scenario, stack)
    if hidden is not None:
        return hidden
    stop = stop_unset(scenario, stack)
    if stop is not None:
        return stop
    delay_s = scenario.stack.policy.ready_delay_s
    unmanaged = stack.unmanaged()
    if delay_s > 0 and "policy" in unmanaged:
        return f"stack.policy.ready_delay_s={delay_s:g} stops and restarts the policy: {unmanaged['policy']}"
    return None


def stop_unset(scenario: Scenario, stack: ChaosStack) -> str | None:
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
    if MODEL_NAME in stack.gym.real_servers:
        return (
            f"stack.policy.stop={list(stop)!r} needs our model server to take extra sampling fields per "
            "test; real NeMo Gym's vllm_model reads its extra_body from its config at start"
        )
    return None


def hidden_exit(scenario: Scenario, stack: ChaosStack) -> str | None:
    """Why a server exit ``scenario`` judges the collector's answer to cannot reach it, or None.

    An invariant that judges how the collector answers a server going down (``judges_exits``:
    ``outage_fails_collection``) judges something only where that exit reaches the collector. From
    NeMo Gym 0.5 on the collector meets each agent only through its ``legacy_agent`` relay, which
    retries a refused agent without limit (``nemo_gym.server_utils``, ``_internal=True``): a killed
    agent then looks to any collector exactly like a frozen one.
    """
    gym = stack.gym
    relays = gym.relays if isinstance(gym, NemoGymStack) else {}
    judging = [
        name
        for name in scenario.expect.invariants
        if getattr(invariants.BY_NAME.get(name), "judges_exits", False)
    ]
    if not isinstance(gym, NemoGymStack) or not relays or not judging:
        return None
    version = gym.nemo_gym_version
    for index, step in enumerate(scenario.faults):
        if not getattr(faults.fault_class(step.kind), "terminates_target", False):
            continue
        for server in stack.expand_target(step.target):
            if server in relays:
                return (
                    f"faults/{index} {step.kind} on {server!r}: {', '.join(judging)} judges how the "
                    f"collector answers {server}'s exit, and on NeMo Gym {version} "
                    f"the collector reaches {server} only through its legacy_agent relay "
                    f"{relays[server]!r}, which retries a dead agent without limit: the exit reaches "
                    "no collector, and the outage looks like a hang (run it on the embedded servers "
                    "or NeMo Gym 0.4)"
                )
    return None


def drift_prevented(scenario: Scenario, stack: ChaosStack) -> str | None:
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
    if not waits_for_the_model or not isinstance(stack.gym, NemoGymStack):
        return None
    if not any(replica.pins_tool_calls for replica in stack.started_replicas):
        return None
    return (
        f"expect.witness {DRIFT_WITNESS} waits for the model's own tool-call JSON to drift, and real vLLM's "
        "strict tool calling forces each Hermes tool call's envelope as the chat template writes it, so "
        "behind NeMo Gym's vllm_model it almost never does (set VLLM_ENFORCE_STRICT_TOOL_CALLING=0 for the "
        "policy to run it; policy-tokenize-drift drifts prompts on this stack)"
    )


def unreachable(step: FaultStep, reach: Reach) -> str | None:
    """Why ``step`` cannot reach a collector with ``reach``, or None (``abilities.unreached`` with
    the step's route)."""
    return abilities.unreached(reach, step.target, retarget.aimed_route(step))
