"""The fit step's rules on the collector: what a collector, by what it declares, cannot run.

They read only the scenario and the collector's declared abilities (``abilities.declared``), no
stack, so a scenario the collector cannot express says so before the stack starts
(``collector_unfit``): the styles and modes, groups, collections and row numbering the collector
takes (``unsupported``); the stack settings its loop never meets (``setting_unmet``); its reach (a
collector running its own loop declares what it requests: a fault aimed elsewhere, or at a route
it never requests, would never fire, and stop strings set in the model server never reach its
generations). A scenario's faults are judged where the collector's ``retargets`` move them
(``engine.retarget``). The stack's rules, and the step that asks both, are ``engine.fit``'s.

One finer answer leaves the scenario running: ``inapplicable`` names the invariants that do not
apply to the collector by what it declares (``concurrency_bounded`` to one keeping its own
concurrency), each with why; the engine reports each as NOT_JUDGED with that reason, unrun, and a
scenario listing it is not vacuous for it, while the other invariants judge the run.
"""

from __future__ import annotations

from pytest_rollout_chaos.collector.abilities import Abilities, Reach
from pytest_rollout_chaos.collector.protocol import Mode, Style
from pytest_rollout_chaos.engine import retarget
from pytest_rollout_chaos.invariants.concurrency_bounded import ConcurrencyBounded
from pytest_rollout_chaos.scenario.model import FaultStep, Scenario
from pytest_rollout_chaos.servers.policy.replicas import replica_of


def collector_unfit(scenario: Scenario, declared: Abilities) -> str | None:
    """Why a collector that declares ``declared`` cannot run ``scenario``, or None (no stack needed:
    a scenario the collector cannot express says so before the stack starts). Its faults are
    judged where the collector's ``retargets`` move them."""
    return unfit(retarget.retargeted(scenario, declared.retargets), declared)


def unfit(scenario: Scenario, declared: Abilities) -> str | None:
    """``collector_unfit`` of a scenario whose faults the collector's retargets have moved already."""
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
    if stop and "model" not in reach:  # the scenarios' name for the Gym model server
        return (
            f"stack.policy.stop={list(stop)!r} cannot reach the collector under test: it is set in the "
            "Gym model server, and the collector's own loop generates without it (its requests go to "
            f"{', '.join(reach)} only)"
        )
    for index, step in enumerate(scenario.faults):
        why = unreachable(step, reach)
        if why is not None:
            calls = ", ".join(
                target + (f" ({', '.join(routes)})" if routes else "") for target, routes in reach.items()
            )
            unmoved = unmoved_why(declared, step.kind, step.target)
            return (
                f"faults/{index} {step.kind} cannot reach the collector under test: {why}; the "
                f"collector's own requests go to {calls} only"
            ) + (f"; not moved to them: {unmoved}" if unmoved else "")
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


def unmoved_why(declared: Abilities, kind: str, target: str) -> str | None:
    """Why the collector moves no fault of ``kind`` on ``target`` (its ``unmoved``, by kind first,
    then target; a policy replica as ``policy``), or None when it declares nothing for them."""
    keys = (kind, target, replica_of(target)[0])
    return next((declared.unmoved[key] for key in keys if key in declared.unmoved), None)


def unreachable(step: FaultStep, reach: Reach) -> str | None:
    """Why ``step`` cannot reach a collector with ``reach``, or None (``unreached`` with the
    step's route)."""
    return unreached(reach, step.target, retarget.aimed_route(step))


def unreached(reach: Reach, target: str, route: str | None) -> str | None:
    """Why a fault on ``target`` (``route`` when it names one) cannot reach a collector with
    ``reach``, or None; one policy replica (``policy[0]``) counts as ``policy``."""
    reached = target if target in reach else replica_of(target)[0]
    if reached not in reach:
        return f"it acts on {target!r}"
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
