"""Which of a scenario's faults can reach the collector under test, from what it declares it calls.

Most collectors send every row through the Gym stack, so every fault target lies on their path.
A collector that runs its own loop (SkyRL's generator calls the policy and the resources server
itself, never an agent) declares ``reaches``: the fault targets its own requests meet, each with
the routes it requests there (``None``: any route, or a fault with no route). A scenario whose
fault aims elsewhere, or at a route it never requests, would only show a fault that never fired,
so it skips, naming the fault and what the collector does call. Without ``reaches`` nothing skips.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.scenario.model import FaultStep, Scenario
from pytest_rollout_chaos.servers.policy.replicas import replica_of

Reach = Mapping[str, tuple[str, ...] | None]


def declared_reach(collector: object) -> Reach | None:
    """The collector's (or its class's, or its factory's) ``reaches``, checked; None when absent."""
    declared = getattr(collector, "reaches", None)
    if declared is None:
        return None
    if not isinstance(declared, Mapping) or not all(
        isinstance(target, str)
        and (routes is None or (isinstance(routes, tuple) and all(isinstance(r, str) for r in routes)))
        for target, routes in declared.items()
    ):
        owner = collector if isinstance(collector, type) else type(collector)
        raise CollectorTargetError(
            f"{owner.__name__}.reaches is {declared!r}; valid: a mapping of fault target to the "
            'routes requested there (a tuple) or None, such as {"policy": ("/v1/completions",)}'
        )
    return declared


def unreachable(step: FaultStep, reach: Reach) -> str | None:
    """Why ``step`` cannot reach a collector with ``reach``, or None; one policy replica
    (``policy[0]``) counts as ``policy``."""
    target = step.target if step.target in reach else replica_of(step.target)[0]
    if target not in reach:
        return f"it acts on {step.target!r}"
    routes = reach[target]
    route = _route(step)
    if routes is None or route is None or any(_matches(route, given) for given in routes):
        return None
    return f"it acts on {step.target!r} route {route}, which the collector never requests there"


def skip_unreachable_faults(collector: object, scenario: Scenario) -> None:
    """Skip ``scenario`` when one of its faults cannot reach the collector (module docstring)."""
    reach = declared_reach(collector)
    if reach is None:
        return
    for index, step in enumerate(scenario.faults):
        why = unreachable(step, reach)
        if why is not None:
            calls = ", ".join(
                target + (f" ({', '.join(routes)})" if routes else "") for target, routes in reach.items()
            )
            pytest.skip(
                f"faults/{index} {step.kind} cannot reach the collector under test: {why}; the "
                f"collector's own requests go to {calls} only"
            )


def _route(step: FaultStep) -> str | None:
    given: Any = step.params.get("route")
    if isinstance(given, str):
        return given
    default: Any = getattr(registry.fault_class(step.kind), "default_route", None)
    return default if isinstance(default, str) else None


def _matches(route: str, requested: str) -> bool:
    """A fault route (exact, or a prefix ending in ``/`` or ``*``) matches a requested path."""
    if route.endswith("*"):
        return requested.startswith(route[:-1])
    if route.endswith("/"):
        return requested.startswith(route)
    return requested == route
