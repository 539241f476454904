"""The fit step: can this scenario run on this stack with this collector? Facts first, then rules.

Every fact the answer needs is gathered before any rule runs: what the collector declares
(``abilities.declared``: styles, modes, groups, collections, row numbering, reach, retargets, what
it does not move, whether it sets stop strings itself), what the stack is and where each fault
step acts once the retargets have moved it (``engine.fit_facts``).

The rules then read only those facts and the scenario, all here: what the collector takes
(``unsupported``), the stack settings its loop never meets (``setting_unmet``), its reach (a fault
aimed where its own loop never requests would never fire, nor would one triggered by the requests
of a server it never asks; stop strings set in the model server never reach its generations unless
``sets_stop``), the replicas asked for (``replicas_unmet``), what each fault needs of its target,
what real NeMo Gym or real vLLM cannot do (``hidden_exit``, ``drift_prevented``, ``stop_unset``, a
verifier scoring by the answer alone), a policy restart on a policy this run did not start.

One finer answer leaves the scenario running: ``inapplicable`` names the invariants that do not
apply to the collector (``concurrency_bounded`` to one keeping its own concurrency), with why; the
engine reports them NOT_JUDGED, unrun, and a scenario listing them is not vacuous for them.

Nothing here raises a skip: a runner turns the reason into one (``errors.CannotRunHere``, which
pytest's scenario item reports as a skip), so the engine runs under any runner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pytest_rollout_chaos.collector import abilities
from pytest_rollout_chaos.collector.abilities import Abilities
from pytest_rollout_chaos.collector.protocol import Mode, Style
from pytest_rollout_chaos.engine import retarget
from pytest_rollout_chaos.engine.fit_facts import StackFacts, StepFacts, stack_facts, step_facts
from pytest_rollout_chaos.invariants import registry as invariants
from pytest_rollout_chaos.invariants.concurrency_bounded import ConcurrencyBounded
from pytest_rollout_chaos.scenario.model import FaultStep, Scenario
from pytest_rollout_chaos.servers.gym.stack import MODEL_NAME, RESOURCES_NAME
from pytest_rollout_chaos.stack import ChaosStack

DRIFT_WITNESS: Final = "prompt_ids_drifted"


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
    moved = retarget.retarget(scenario, declared.retargets, declared.retriggers)
    wanted = scenario.stack.policy.replicas or run_replicas
    steps = step_facts(moved.scenario.faults, stack.targets.using(wanted))
    reason = (
        replicas_unmet(scenario, stack, wanted)
        or stack_unfit(moved.scenario, steps, stack, sets_stop=declared.sets_stop is not None)
        or _unfit(moved.scenario, steps, declared)
    )
    return Fit(wanted, moved, reason)


def collector_unfit(scenario: Scenario, declared: Abilities) -> str | None:
    """Why a collector that declares ``declared`` cannot run ``scenario``, or None (no stack needed:
    a scenario the collector cannot express says so before the stack starts). Its faults are
    judged where the collector's ``retargets`` move them."""
    return unfit(retarget.retargeted(scenario, declared.retargets, declared.retriggers), declared)


def unfit(scenario: Scenario, declared: Abilities) -> str | None:
    """``collector_unfit`` of a scenario whose faults the collector's retargets have moved already."""
    return _unfit(scenario, step_facts(scenario.faults), declared)


def _unfit(scenario: Scenario, steps: tuple[StepFacts, ...], declared: Abilities) -> str | None:
    workload = scenario.workload
    reason = unsupported(
        declared,
        style=workload.style,
        mode=workload.mode,
        group_size=workload.generations_per_prompt,
        row_ids=workload.row_ids,
        collections=workload.collections,
    ) or setting_unmet(scenario, declared)
    reach = declared.reach
    if reason is not None or reach is None:
        return reason
    stop = scenario.stack.policy.stop
    # "model": the scenarios' name for the Gym model server, which sets them for the agents
    if stop and "model" not in reach and declared.sets_stop is None:
        return (
            f"stack.policy.stop={list(stop)!r} cannot reach the collector under test: it is set in the "
            "Gym model server, and the collector's own loop generates without it (its requests go to "
            f"{', '.join(reach)} only)"
        )
    calls = ", ".join(
        target + (f" ({', '.join(routes)})" if routes else "") for target, routes in reach.items()
    )
    for step in steps:
        why = unreached(declared, step.target, step.family, step.route)
        if why is not None:
            unmoved = unmoved_why(declared, step)
            return (
                f"faults/{step.index} {step.kind} cannot reach the collector under test: {why}; the "
                f"collector's own requests go to {calls} only"
            ) + (f"; not moved to them: {unmoved}" if unmoved else "")
        counted = step.at.server or "agent"
        if step.at.kind == "on_request" and unreached(declared, counted, step.at_family or counted, None):
            return (
                f"faults/{step.index} {step.kind} is triggered {step.at.describe()}, which the collector "
                f"under test never requests, so it would never fire: the collector's own requests go to "
                f"{calls} only (a collector's retriggers say which server's requests count instead)"
            )
    return None


def unsupported(
    declared: Abilities,
    *,
    style: Style,
    mode: Mode,
    group_size: int,
    row_ids: str = "positions",
    collections: int = 1,
) -> str | None:
    """Why a collector that declares ``declared`` cannot run a workload of ``style``, ``mode``,
    groups of ``group_size`` rows, ``_rowidx`` numbered by ``row_ids`` and ``collections`` in a
    row; None when it can (or declares nothing)."""
    styles, modes = declared.styles, declared.modes
    if style not in styles:
        return (
            f"{style}-style scenario; the collector under test supports only {', '.join(styles)} style "
            f"(its styles = {styles!r})"
        )
    if mode not in modes:
        return (
            f"{mode}-mode scenario; the collector under test supports only {', '.join(modes)} mode "
            f"(its modes = {modes!r})"
        )
    if (style, mode) in declared.cannot_combine:
        return declared.cannot_combine[style, mode]
    largest = declared.max_group_size
    if largest is not None and group_size > largest:
        return (
            f"groups of {group_size} generations per prompt; the collector takes at most {largest}: "
            f"{declared.max_group_size_why}"
        )
    most = declared.max_collections
    if most is not None and collections > most:
        return (
            f"{collections} collections in a row (workload.collections); the collector runs at most "
            f"{most}: {declared.max_collections_why}"
        )
    if row_ids != "positions" and declared.numbers_rows is not None:
        return (
            f"rows numbered {row_ids} (workload.row_ids); the collector numbers every row by its "
            f"position itself, so these ids never reach the servers: {declared.numbers_rows}"
        )
    return None


def setting_unmet(scenario: Scenario, declared: Abilities) -> str | None:
    """Why the collector's loop never meets what a stack setting ``scenario`` changes does (its
    ``unmoved``, by setting), or None: the model server re-rendering every turn, the verifier
    scoring a row higher each time it scores it again."""
    changed = {
        "stack.policy.splice_prefix": "false" if not scenario.stack.policy.splice_prefix else None,
        "stack.rescore_bonus": f"{scenario.stack.rescore_bonus:g}" if scenario.stack.rescore_bonus else None,
    }
    for setting, value in changed.items():
        if value is not None and setting in declared.unmoved:
            why = declared.unmoved[setting]
            return f"{setting}: {value} has no counterpart in the collector under test: {why}"
    return None


def unmoved_why(declared: Abilities, step: StepFacts) -> str | None:
    """Why the collector moves no fault of ``step``'s kind on its target (its ``unmoved``, by kind
    first, then target, then a policy replica's family), or None when it declares nothing for them."""
    keys = (step.kind, step.target, step.family)
    return next((declared.unmoved[key] for key in keys if key in declared.unmoved), None)


def unreachable(step: FaultStep, declared: Abilities) -> str | None:
    """Why ``step`` cannot reach a collector that declares ``declared`` (its ``reach``), or None
    (``unreached`` with the route it aims at)."""
    (facts,) = step_facts((step,))
    return unreached(declared, facts.target, facts.family, facts.route)


def unreached(declared: Abilities, target: str, family: str, route: str | None) -> str | None:
    """Why a fault on ``target`` (a replica of ``family``; ``route`` when it names one) cannot reach
    a collector that declares ``declared``, or None (also when it declares no reach); one policy
    replica (``policy[0]``) counts as ``policy``, unless the reach names replicas of it: then only
    those (a collector given one replica's address)."""
    reach = declared.reach
    if reach is None:
        return None
    named = declared.reach_replicas
    replicas = named[family] if family != target and family in named else ()
    reached = target if target in reach or replicas else family
    if reached not in reach:
        return f"it acts on {target!r}" + (
            f", a replica the collector is not given (it requests {', '.join(replicas)} only)"
            if replicas
            else ""
        )
    routes = reach[reached]
    if routes is None or route is None or any(_requests(route, given) for given in routes):
        return None
    return f"it acts on {target!r} route {route}, which the collector never requests there"


def _requests(route: str, requested: str) -> bool:
    """A fault route (exact, or a prefix ending in ``/`` or ``*``) matches a requested path."""
    if route.endswith("*"):
        return requested.startswith(route[:-1])
    if route.endswith("/"):
        return requested.startswith(route)
    return requested == route


def inapplicable(declared: Abilities) -> dict[str, str]:
    """The invariants that do not apply to a collector that declares ``declared``, each with why;
    empty when all do."""
    own = declared.own_concurrency
    if own is None:
        return {}
    return {
        ConcurrencyBounded.name: (
            "not applicable: the collector under test keeps its own concurrency, not "
            f"settings.max_concurrency (workload.max_concurrency): {own} (its own_concurrency)"
        )
    }


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
    return stack_unfit(scenario, step_facts(scenario.faults, stack.targets()), stack_facts(stack))


def stack_unfit(
    scenario: Scenario,
    steps: tuple[StepFacts, ...],
    stack: StackFacts,
    *,
    sets_stop: bool = False,
) -> str | None:
    """Why ``scenario`` (its fault ``steps``, with the servers each stands for on the stack's
    targets in use) cannot run on a stack with ``stack``'s facts, whatever the collector, or None;
    ``sets_stop``: the collector sets stop strings in its own generations, so the stack need not
    (``stop_unset``).

    Semantic faults act from the fault layer in front of every server and the layer records
    every request, so no scenario needs anything inside a server. What a fault needs is its
    class's to say (``Fault.needs``).
    """
    for step in steps:
        if step.beyond is not None:
            return f"faults/{step.index} {step.kind} on {step.target!r}: {step.beyond}"
        why = stack.lacks.why(step.servers, step.needs)
        if why is not None:
            return f"faults/{step.index} {step.kind} on {step.target!r}: {why}"
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
        hidden_exit(scenario, steps, stack)
        or drift_prevented(scenario, stack)
        or (None if sets_stop else stop_unset(scenario, stack))
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
    ``extra_body`` at start only. Not asked of a collector that sets them itself (``sets_stop``)."""
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


def hidden_exit(scenario: Scenario, steps: tuple[StepFacts, ...], stack: StackFacts) -> str | None:
    """Why a server exit ``scenario`` (its ``steps``, with the servers each stands for) judges the
    collector's answer to cannot reach it, or None.

    An invariant that judges how the collector answers a server going down (``judges_exits``:
    ``outage_fails_collection``) judges something only where that exit reaches the collector. From
    NeMo Gym 0.5 on the collector meets each agent only through its ``legacy_agent`` relay, which
    retries a refused agent without limit (``nemo_gym.server_utils``, ``_internal=True``): a killed
    agent then looks to any collector exactly like a frozen one.
    """
    relays = stack.relays
    judging = [name for name in scenario.expect.invariants if name in invariants.JUDGING_EXITS]
    if not relays or not judging:
        return None
    for step in steps:
        if not step.terminates:
            continue
        for server in step.servers:
            if server in relays:
                return (
                    f"faults/{step.index} {step.kind} on {server!r}: {', '.join(judging)} judges how the "
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
