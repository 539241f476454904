"""What a collector declares it can run, read in one place.

A collector (or its class, or its factory) may declare, as attributes:

- ``styles``, ``modes``: the workload styles and modes it runs (all by default);
- ``cannot_combine``: ``{(style, mode): why}``, pairs of them it cannot run together (the
  ``nemo_rl`` adapter drives validation only through ``validate()``'s native rollouts);
- ``max_group_size`` with ``max_group_size_why``: the largest GRPO group it takes, and why (a
  SkyRL tree without the hook that tells a group's copies apart takes one row per prompt);
- ``max_collections`` with ``max_collections_why``: the most collections it runs in a row on one
  object (``workload.collections``), and why no more (one whose trainer state does not outlive a
  collection, so a second one would test the stand-in, not the trainer);
- ``reaches``: the fault targets its own requests meet, each with the routes it requests there
  (``None``: any route); a collector that sends every row through the Gym stack leaves it out;
- ``retargets``: ``Retarget``s, each moving a catalog fault aimed at a part of the Gym stack the
  collector's loop replaces (an agent's ``/run``, the agents' model link) onto the request of its
  own loop that does the same job, with why (``engine.retarget`` applies them before the fit step,
  and the History records each move); a fault no retarget moves keeps its target;
- ``unmoved``: ``{fault kind or target: why}``, why a fault the collector's loop never meets has no
  counterpart there to move it to; a skip by reach then says so. A key naming a stack setting
  (``STACK_SETTINGS``) says why the collector's loop never meets what that setting changes: a
  scenario that sets it skips, saying so;
- ``honours_max_concurrency = True``: it keeps at most ``CollectorSettings.max_concurrency`` rows
  in flight, which ``concurrency_bounded`` then holds it to; or ``own_concurrency``: why it keeps
  another limit or none (a trainer's own setting, every row at once), so that invariant does not
  apply to it. A collector that declares neither is not judged by it either, and a scenario that
  lists it fails as vacuous there: declaring nothing must not look like a limit kept;
- ``numbers_rows``: why it stamps every row's ``_rowidx`` with the row's position itself (a
  trainer that does): the workload's own ids never reach the servers, so a scenario that numbers
  its rows otherwise (``workload.row_ids``) cannot be judged on it.

The fit step (``engine.fit``) asks ``unsupported`` and ``unreached`` before the collection starts,
so a collector never skips from inside ``collect`` after the faults are armed. A declaration of the
wrong shape is a ``CollectorTargetError`` saying what is valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from pytest_rollout_chaos.collector.protocol import (
    MODES,
    STYLES,
    CollectorSettings,
    Mode,
    Style,
    supported_modes,
    supported_styles,
)
from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.servers.policy.replicas import replica_of

Reach = Mapping[str, tuple[str, ...] | None]
COMBINE_EXAMPLE: Final = 'cannot_combine = {("native", "train"): "why"}'


def unsupported(
    collector: object,
    *,
    style: Style,
    mode: Mode,
    group_size: int,
    row_ids: str = "positions",
    collections: int = 1,
) -> str | None:
    """Why ``collector`` cannot run a workload of ``style``, ``mode``, groups of ``group_size``
    rows, ``_rowidx`` numbered by ``row_ids`` and ``collections`` in a row, from what it declares;
    None when it can (or declares nothing)."""
    styles = supported_styles(collector)
    if style not in styles:
        return (
            f"{style}-style scenario; the collector under test supports only {', '.join(styles)} style "
            f"(its styles = {styles!r})"
        )
    modes = supported_modes(collector)
    if mode not in modes:
        return (
            f"{mode}-mode scenario; the collector under test supports only {', '.join(modes)} mode "
            f"(its modes = {modes!r})"
        )
    refused = cannot_combine(collector).get((style, mode))
    if refused is not None:
        return refused
    largest = getattr(collector, "max_group_size", None)
    if largest is not None and group_size > largest:
        why = getattr(collector, "max_group_size_why", "") or "its max_group_size"
        return f"groups of {group_size} generations per prompt; the collector takes at most {largest}: {why}"
    most = getattr(collector, "max_collections", None)
    if most is not None and collections > most:
        why = getattr(collector, "max_collections_why", "") or "its max_collections"
        return (
            f"{collections} collections in a row (workload.collections); the collector runs at most "
            f"{most}: {why}"
        )
    renumbers = getattr(collector, "numbers_rows", None)
    if row_ids != "positions" and renumbers is not None:
        if not isinstance(renumbers, str) or not renumbers:
            raise CollectorTargetError(
                f"{_owner(collector)}.numbers_rows is {renumbers!r}; valid: a non-empty string saying "
                "where it stamps each row's _rowidx with its position"
            )
        return (
            f"rows numbered {row_ids} (workload.row_ids); the collector numbers every row by its "
            f"position itself, so these ids never reach the servers: {renumbers}"
        )
    return None


def cannot_combine(collector: object) -> Mapping[tuple[Style, Mode], str]:
    """The declared ``cannot_combine``, checked; empty when absent."""
    declared = getattr(collector, "cannot_combine", None)
    if declared is None:
        return {}
    if not isinstance(declared, Mapping) or not all(
        isinstance(pair, tuple)
        and len(pair) == 2
        and pair[0] in STYLES
        and pair[1] in MODES
        and isinstance(why, str)
        for pair, why in declared.items()
    ):
        raise CollectorTargetError(
            f"{_owner(collector)}.cannot_combine is {declared!r}; valid: a mapping of (style, mode) "
            f"to why, styles {STYLES}, modes {MODES}, such as {COMBINE_EXAMPLE}"
        )
    return declared


def declared_reach(collector: object) -> Reach | None:
    """The declared ``reaches``, checked; None when absent."""
    declared = getattr(collector, "reaches", None)
    if declared is None:
        return None
    if not isinstance(declared, Mapping) or not all(
        isinstance(target, str)
        and (routes is None or (isinstance(routes, tuple) and all(isinstance(r, str) for r in routes)))
        for target, routes in declared.items()
    ):
        raise CollectorTargetError(
            f"{_owner(collector)}.reaches is {declared!r}; valid: a mapping of fault target to the "
            'routes requested there (a tuple) or None, such as {"policy": ("/v1/completions",)}'
        )
    return declared


@dataclass(frozen=True, slots=True)
class Retarget:
    """A catalog fault on ``target`` (of kind ``kinds``, on ``route``) acts, for this collector, on
    ``to`` (``to_route``): the request its own loop makes where the Gym stack's ``target`` would
    have been asked the same thing; ``why`` says which request that is.

    ``kinds``: the fault kinds it moves (empty: any); ``route``: the fault's route it moves (the
    fault class's default when the step names none; None: any route, none included);
    ``to_route``: the route on ``to`` (None: the fault's own route, kept).
    """

    target: str
    to: str
    why: str
    kinds: tuple[str, ...] = ()
    route: str | None = None
    to_route: str | None = None

    def moves(self, kind: str, target: str, route: str | None) -> bool:
        """Does this retarget move a fault of ``kind`` on ``target`` aimed at ``route``?"""
        return (
            target == self.target
            and (not self.kinds or kind in self.kinds)
            and (self.route is None or route == self.route)
        )


def declared_retargets(collector: object) -> tuple[Retarget, ...]:
    """The declared ``retargets``, checked; empty when absent. A retarget may not move a fault onto
    a target another one moves (a fault moves once)."""
    declared = getattr(collector, "retargets", None)
    if declared is None:
        return ()
    if not isinstance(declared, tuple) or not all(
        isinstance(item, Retarget) and item.why and (item.to, item.to_route) != (item.target, item.route)
        for item in declared
    ):
        raise CollectorTargetError(
            f"{_owner(collector)}.retargets is {declared!r}; valid: a tuple of abilities.Retarget, each "
            "moving faults somewhere else, with why"
        )
    chained = [
        item
        for item in declared
        for other in declared
        if other.target == item.to and (other.route is None or other.route == item.to_route)
    ]
    if chained:
        raise CollectorTargetError(
            f"{_owner(collector)}.retargets moves faults onto {', '.join(item.to for item in chained)}, "
            "where it also moves them elsewhere; valid: each fault moved once, onto what no retarget moves"
        )
    return declared


STACK_SETTINGS: Final = ("stack.policy.splice_prefix", "stack.rescore_bonus")
"""The stack settings an ``unmoved`` key may name: each changes what one server answers."""


def unmoved_why(collector: object, kind: str, target: str) -> str | None:
    """Why ``collector`` moves no fault of ``kind`` on ``target`` (its ``unmoved``, by kind first,
    then target; a policy replica as ``policy``), or None when it declares nothing for them."""
    declared = _unmoved(collector)
    for key in (kind, target, replica_of(target)[0]):
        if key in declared:
            return declared[key]
    return None


def unmoved_setting_why(collector: object, setting: str) -> str | None:
    """Why ``collector``'s loop never meets what the stack ``setting`` (``STACK_SETTINGS``) changes,
    or None when it declares nothing for it."""
    return _unmoved(collector).get(setting)


def _unmoved(collector: object) -> Mapping[str, str]:
    declared = getattr(collector, "unmoved", None)
    if declared is None:
        return {}
    if not isinstance(declared, Mapping) or not all(
        isinstance(key, str) and isinstance(why, str) and why for key, why in declared.items()
    ):
        raise CollectorTargetError(
            f"{_owner(collector)}.unmoved is {declared!r}; valid: a mapping of fault kind, target or "
            f"stack setting ({', '.join(STACK_SETTINGS)}) to why the collector's loop has no "
            "counterpart for it"
        )
    return declared


def unreached(reach: Reach, target: str, route: str | None) -> str | None:
    """Why a fault on ``target`` (``route`` when it names one) cannot reach a collector with
    ``reach``, or None; one policy replica (``policy[0]``) counts as ``policy``."""
    requested = {
        name: routes is None or route is None or any(_requests(route, given) for given in routes)
        for name, routes in reach.items()
    }
    reached = target if target in reach else replica_of(target)[0]
    if reached not in reach:
        return f"it acts on {target!r}"
    if requested[reached]:
        return None
    return f"it acts on {target!r} route {route}, which the collector never requests there"


def _requests(route: str, requested: str) -> bool:
    """A fault route (exact, or a prefix ending in ``/`` or ``*``) matches a requested path."""
    if route.endswith("*"):
        return requested.startswith(route[:-1])
    if route.endswith("/"):
        return requested.startswith(route)
    return requested == route


def _owner(collector: object) -> str:
    owner = collector if isinstance(collector, type) else type(collector)
    return owner.__name__


def concurrency_limit(collector: object, settings: CollectorSettings) -> int | None:
    """The rows ``collector`` keeps in flight at most: the settings' ``max_concurrency`` when it
    declares it honours it (``honours_max_concurrency = True``), else None (no limit declared)."""
    return settings.max_concurrency if getattr(collector, "honours_max_concurrency", False) is True else None


def own_concurrency(collector: object) -> str | None:
    """The declared ``own_concurrency`` (why the collector keeps no ``max_concurrency`` of the
    settings), checked; None when absent."""
    declared = getattr(collector, "own_concurrency", None)
    if declared is None:
        return None
    if not isinstance(declared, str) or not declared:
        raise CollectorTargetError(
            f"{_owner(collector)}.own_concurrency is {declared!r}; valid: a non-empty string saying "
            "what bounds its rows in flight instead of settings.max_concurrency (a trainer's own "
            "setting, or nothing)"
        )
    if getattr(collector, "honours_max_concurrency", False) is True:
        raise CollectorTargetError(
            f"{_owner(collector)} declares both honours_max_concurrency = True and own_concurrency "
            f"{declared!r}; valid: one of them"
        )
    return declared
