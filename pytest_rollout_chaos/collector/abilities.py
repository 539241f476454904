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
  (``None``: any route; ``policy`` stands for every replica, unless it names replicas, ``policy[0]``:
  then only those); a collector that sends every row through the Gym stack leaves it out;
- ``retargets``: ``Retarget``s, each moving a catalog fault aimed at a part of the Gym stack the
  collector's loop replaces (an agent's ``/run``, the agents' model link) onto the request of its
  own loop that does the same job, with why (``engine.retarget`` applies them before the fit step,
  and the History records each move); a fault no retarget moves keeps its target;
- ``retriggers``: ``Retrigger``s, each saying which server's requests an ``on_request`` trigger on
  a server the collector's loop never asks counts instead (one model server request for one policy
  call of its own loop), with why (``engine.retarget`` applies them too, recorded as moved);
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
  its rows otherwise (``workload.row_ids``) cannot be judged on it;
- ``sets_stop``: where a collector that generates itself (its ``reaches`` without the Gym model
  server) puts ``CollectorSettings.stop`` in its own sampling parameters (a trainer's stop setting),
  so a scenario with ``stack.policy.stop`` is judged on it rather than skipped.

``declared`` reads them all at once into ``Abilities``, the facts about the collector that the fit
step's rules (``engine.fit``) judge a scenario by before the collection starts, so a collector never
skips from inside ``collect`` after the faults are armed. This module says what was declared, never
whether a scenario fits. A declaration of the wrong shape is a ``CollectorTargetError`` saying what
is valid.
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


@dataclass(frozen=True, slots=True)
class Abilities:
    """Everything a collector declares, read and checked once: what the fit step's rules read."""

    styles: tuple[Style, ...]
    modes: tuple[Mode, ...]
    cannot_combine: Mapping[tuple[Style, Mode], str]
    max_group_size: int | None
    max_group_size_why: str
    max_collections: int | None
    max_collections_why: str
    numbers_rows: str | None  # where it stamps each row's ``_rowidx`` itself, or None
    sets_stop: str | None  # where it sets the scenario's stop strings in its own generations, or None
    reach: Reach | None  # None: every row goes through the Gym stack
    reach_replicas: Mapping[str, tuple[str, ...]]  # the policy replicas ``reach`` names, by server
    retargets: tuple[Retarget, ...]
    retriggers: tuple[Retrigger, ...]
    unmoved: Mapping[str, str]
    own_concurrency: str | None


def declared(collector: object) -> Abilities:
    """What ``collector`` (its factory, its class or the collector built) declares, checked."""
    reach = declared_reach(collector)
    return Abilities(
        styles=supported_styles(collector),
        modes=supported_modes(collector),
        cannot_combine=cannot_combine(collector),
        max_group_size=getattr(collector, "max_group_size", None),
        max_group_size_why=getattr(collector, "max_group_size_why", "") or "its max_group_size",
        max_collections=getattr(collector, "max_collections", None),
        max_collections_why=getattr(collector, "max_collections_why", "") or "its max_collections",
        numbers_rows=_numbers_rows(collector),
        sets_stop=_sets_stop(collector),
        reach=reach,
        retargets=declared_retargets(collector),
        retriggers=declared_retriggers(collector),
        unmoved=_unmoved(collector),
        own_concurrency=own_concurrency(collector),
        reach_replicas=replicas_named(reach),
    )


def _numbers_rows(collector: object) -> str | None:
    return _where(collector, "numbers_rows", "where it stamps each row's _rowidx with its position")


def _sets_stop(collector: object) -> str | None:
    return _where(
        collector, "sets_stop", "where it sets CollectorSettings.stop in its own sampling parameters"
    )


def _where(collector: object, name: str, saying: str) -> str | None:
    """The declared ``name``: None, or a non-empty string saying ``saying``."""
    where = getattr(collector, name, None)
    if where is not None and (not isinstance(where, str) or not where):
        raise CollectorTargetError(
            f"{_owner(collector)}.{name} is {where!r}; valid: a non-empty string saying {saying}"
        )
    return where


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


def replicas_named(reach: Reach | None) -> Mapping[str, tuple[str, ...]]:
    """The policy replicas ``reach`` names (``policy[0]``: a collector given one replica's
    address), by the server they are replicas of."""
    named: dict[str, tuple[str, ...]] = {}
    for name in reach or ():
        base, index = replica_of(name)
        if index is not None:
            named[base] = (*named.get(base, ()), name)
    return named


@dataclass(frozen=True, slots=True)
class Retarget:
    """A catalog fault on ``target`` (of kind ``kinds``, on ``route``) acts, for this collector, on
    ``to`` (``to_route``): the request its own loop makes where the Gym stack's ``target`` would
    have been asked the same thing; ``why`` says which request that is.

    ``kinds``: the fault kinds it moves (empty: any); ``route``: the fault's route it moves (the
    fault class's default when the step names none; None: any route, none included);
    ``to_route``: the route on ``to`` (None: the fault's own route, kept); ``styles``: the fault's
    ``style`` it moves (the fault class's default when the step names none; empty: any style, none
    included), for a kind whose meaning survives the move in some styles only (a model answer that
    no longer parses has a counterpart where one parsed into fields has none).
    """

    target: str
    to: str
    why: str
    kinds: tuple[str, ...] = ()
    route: str | None = None
    to_route: str | None = None
    styles: tuple[str, ...] = ()

    def moves(self, kind: str, target: str, route: str | None, style: str | None = None) -> bool:
        """Does this retarget move a fault of ``kind`` on ``target`` aimed at ``route`` (of ``style``,
        None for a fault without one)?"""
        return (
            target == self.target
            and (not self.kinds or kind in self.kinds)
            and (self.route is None or route == self.route)
            and (not self.styles or style in self.styles)
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


@dataclass(frozen=True, slots=True)
class Retrigger:
    """An ``on_request`` trigger on ``server`` counts, for this collector, the requests to ``to``
    (on ``route`` only, when given: the one request doing the job, not the others the loop makes
    there): its own loop asks ``to`` once where the Gym stack's ``server`` would have been asked
    once (one model call: the model server's request, or the collector's own to the policy);
    ``why`` says which requests those are. Without it a trigger on a server the loop never asks
    never fires."""

    server: str
    to: str
    why: str
    route: str | None = None


def declared_retriggers(collector: object) -> tuple[Retrigger, ...]:
    """The declared ``retriggers``, checked; empty when absent. A trigger moves once: onto a server
    no retrigger moves, and from a server only one retrigger names."""
    declared = getattr(collector, "retriggers", None)
    if declared is None:
        return ()
    if not isinstance(declared, tuple) or not all(
        isinstance(item, Retrigger) and item.why and item.to != item.server for item in declared
    ):
        raise CollectorTargetError(
            f"{_owner(collector)}.retriggers is {declared!r}; valid: a tuple of abilities.Retrigger, each "
            "counting another server's requests, with why"
        )
    servers = [item.server for item in declared]
    twice = [item.to for item in declared if item.to in servers] + [
        server for index, server in enumerate(servers) if server in servers[:index]
    ]
    if twice:
        raise CollectorTargetError(
            f"{_owner(collector)}.retriggers moves the triggers on {', '.join(twice)} twice; valid: "
            "each server's trigger moved once, onto a server no retrigger moves"
        )
    return declared


STACK_SETTINGS: Final = ("stack.policy.splice_prefix", "stack.rescore_bonus")
"""The stack settings an ``unmoved`` key may name: each changes what one server answers."""


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
