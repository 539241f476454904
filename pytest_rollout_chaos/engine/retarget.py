"""A scenario's faults as they act for one collector: moved where its own loop makes the request.

A collector that runs its own loop in place of part of the Gym stack (SkyRL's generator runs each
trajectory itself: no NeMo Gym agent, no model server) declares ``retargets``
(``collector.abilities.Retarget``): a fault the catalog aims at the part it replaces acts on the
request of its loop that does that part's job, so the scenario is judged on it instead of
skipping. ``retarget`` rewrites the steps (target, route) and nothing else: kind, trigger,
duration, parameters and the expectations stay the scenario's. A trigger stays too, but for the
server an ``on_request`` trigger counts: where the collector declares ``retriggers``
(``collector.abilities.Retrigger``), a trigger on a server its loop never asks (the model server)
counts the requests of the server its loop asks in its place (the policy; on one route when the
retrigger names it: its generate calls), the same ``nth``. The
fit step works it out once and the schedule gets the same ``Retargeted``, so a moved fault must
still reach the collector and act there (a step that touches nothing fails the scenario), and its
``record`` writes each move into the History, for the story. A scenario file is never changed.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass
from typing import Any, Final

from pytest_rollout_chaos.collector import abilities
from pytest_rollout_chaos.faults import registry as faults
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.scenario.model import FaultStep, Scenario, Trigger

SOURCE: Final = "engine"
EVENT: Final = "retargeted"


@dataclass(frozen=True, slots=True)
class Moved:
    """One fault step a retarget or a retrigger moved: the scenario's ``faults[index]``, where (and
    when) it acts, and why."""

    index: int
    step: FaultStep
    now: FaultStep
    why: str


@dataclass(frozen=True, slots=True)
class Retargeted:
    """A scenario's faults as they act for one collector, worked out once: the scenario with its
    moved steps, and each move (for the History)."""

    scenario: Scenario
    moved: tuple[Moved, ...] = ()

    def record(self, history: History) -> None:
        """One History event per moved fault: where the scenario aimed it, where it acts, and why."""
        for move in self.moved:
            data = {
                "step": move.index,
                "kind": move.step.kind,
                "from": _where(move.step, trigger=move.step.at != move.now.at),
                "to": _where(move.now, trigger=move.step.at != move.now.at),
                "why": move.why,
            }
            history.append(SOURCE, "info", EVENT, data)


def retarget(
    scenario: Scenario,
    moves: tuple[abilities.Retarget, ...],
    retriggers: tuple[abilities.Retrigger, ...] = (),
) -> Retargeted:
    """``scenario`` with each fault one of ``moves`` (a collector's declared ``retargets``) moves,
    moved, and each ``on_request`` trigger one of ``retriggers`` moves counting its server's
    requests (the same scenario object when nothing moves), and the moves."""
    if not moves and not retriggers:
        return Retargeted(scenario)
    done = []
    steps = []
    for index, step in enumerate(scenario.faults):
        at, retrigger = moved_trigger(step.at, retriggers)
        now, move = moved(step, moves)
        steps.append(dataclasses.replace(now, at=at))
        why = "; ".join(given.why for given in (move, retrigger) if given is not None)
        if why:
            done.append(Moved(index, step, steps[-1], why))
    if not done:
        return Retargeted(scenario)
    return Retargeted(dataclasses.replace(scenario, faults=tuple(steps)), tuple(done))


def retargeted(
    scenario: Scenario,
    moves: tuple[abilities.Retarget, ...],
    retriggers: tuple[abilities.Retrigger, ...] = (),
) -> Scenario:
    """``scenario`` with what ``moves`` and ``retriggers`` move, moved; the same object when nothing
    moves."""
    return retarget(scenario, moves, retriggers).scenario


def moved(
    step: FaultStep, moves: tuple[abilities.Retarget, ...]
) -> tuple[FaultStep, abilities.Retarget | None]:
    """``step`` as the first of ``moves`` that moves it rewrites it, and that retarget (None: unmoved)."""
    route, style = aimed_route(step), aimed_style(step)
    for move in moves:
        if move.moves(step.kind, step.target, route, style):
            params = dict(step.params)
            if move.to_route is not None:
                params["route"] = move.to_route
            return dataclasses.replace(step, target=move.to, params=types.MappingProxyType(params)), move
    return step, None


def moved_trigger(
    at: Trigger, retriggers: tuple[abilities.Retrigger, ...]
) -> tuple[Trigger, abilities.Retrigger | None]:
    """``at`` counting the requests of the server the retrigger for its server names, and that
    retrigger (None: an ``at`` that counts no server's requests, or one no retrigger moves)."""
    if at.kind != "on_request":
        return at, None
    for retrigger in retriggers:
        if retrigger.server == at.server:
            return dataclasses.replace(at, server=retrigger.to, route=retrigger.route), retrigger
    return at, None


def aimed_route(step: FaultStep) -> str | None:
    """The route ``step`` aims at: its own, else its fault class's default (None: any)."""
    given: Any = step.params.get("route")
    if isinstance(given, str):
        return given
    default: Any = getattr(faults.fault_class(step.kind), "default_route", None)
    return default if isinstance(default, str) else None


def aimed_style(step: FaultStep) -> str | None:
    """The ``style`` ``step`` has: its own, else its fault class's default (None: a kind without one)."""
    given: Any = step.params.get("style")
    if isinstance(given, str):
        return given
    fields = {field.name: field for field in dataclasses.fields(faults.fault_class(step.kind))}
    default: Any = fields["style"].default if "style" in fields else None
    return default if isinstance(default, str) else None


def _where(step: FaultStep, *, trigger: bool) -> str:
    """Where ``step`` acts (its target and route), and when, where its trigger moved."""
    route = aimed_route(step)
    return step.target + (f" {route}" if route else "") + (f" {step.at.describe()}" if trigger else "")
