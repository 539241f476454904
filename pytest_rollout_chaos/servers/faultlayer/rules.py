"""The fault layer's armed rules: what a rule is, how it is parsed from JSON, and when it fires.

A rule is ``{"server": ..., "effect": ..., "match": {...}, ...effect parameters}``: it applies
to the requests that reach ``server`` (a scenario server name) through any link. Matching
happens in two steps. A request is a *candidate* when its server, route and row match;
candidates are counted per rule (1, 2, 3, ...), across links. A candidate is a *hit* when its
position fits ``nth``/``every``, the seeded coin for ``probability`` comes up, and ``count``
hits have not happened yet:

- ``route``: exact path, or a prefix when it ends with ``/`` or ``*`` (``/v1/*``);
- ``row``: the row the request belongs to (``_rowidx``, or as ``rows.RowIndex`` tells);
- ``nth`` alone: only the nth candidate; ``every`` (with ``nth`` as the start, default 1):
  candidates nth, nth+every, nth+2*every, ...; neither: every candidate;
- ``probability``: a coin per candidate from a ``random.Random`` seeded by the rule's
  ``seed``, else ``ROLLOUT_CHAOS_SEED``, else 0, combined with the rule id (reproducible);
- ``count``: at most this many hits, then the rule stays listed but inert.

The effects, their parameters (types, defaults, bounds, choices) and the match keys are declared
in ``effects``; this module only parses and checks a rule body against that table.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_rollout_chaos.servers.faultlayer.effects import EFFECTS, MATCH

SEED_ENV: Final = "ROLLOUT_CHAOS_SEED"

# effect -> {parameter: (types, default)}; a default of ... means required (read from ``effects``)
EFFECT_PARAMS: Final[Mapping[str, Mapping[str, tuple[tuple[type, ...], Any]]]] = {
    name: {spec.name: (spec.types, spec.default) for spec in effect.params}
    for name, effect in EFFECTS.items()
}
MATCH_KEYS: Final = tuple(spec.name for spec in MATCH)


class RuleError(ValueError):
    """A rule body is invalid; the message names the field and what is valid."""


@dataclass(frozen=True, slots=True)
class Match:
    """Which requests a rule applies to (see the module docstring)."""

    route: str | None = None
    row: int | None = None
    nth: int | None = None
    every: int | None = None
    probability: float | None = None
    count: int | None = None

    def route_matches(self, path: str) -> bool:
        if self.route is None:
            return True
        if self.route.endswith("*"):
            return path.startswith(self.route[:-1])
        if self.route.endswith("/"):
            return path.startswith(self.route)
        return path == self.route

    def position_fits(self, candidate: int) -> bool:
        """Is the ``candidate``-th (1-based) matching request chosen by ``nth``/``every``?"""
        start = self.nth or 1
        if self.every is None:
            return candidate == start if self.nth is not None else True
        return candidate >= start and (candidate - start) % self.every == 0


@dataclass(slots=True)
class Rule:
    """One armed rule with its counters (mutable: candidates and hits grow)."""

    id: str
    server: str
    effect: str
    match: Match
    params: Mapping[str, Any]
    tag: str | None = None
    rng: random.Random = field(default_factory=random.Random)
    candidates: int = 0
    hits: int = 0

    def consider(self, server: str, path: str, row: int | None) -> bool:
        """Count this request if it is a candidate; return True when the rule fires on it."""
        if server != self.server or not self.match.route_matches(path):
            return False
        if self.match.row is not None and row != self.match.row:
            return False
        self.candidates += 1
        if self.match.count is not None and self.hits >= self.match.count:
            return False
        if not self.match.position_fits(self.candidates):
            return False
        if self.match.probability is not None and self.rng.random() >= self.match.probability:
            return False
        self.hits += 1
        return True

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "server": self.server,
            "effect": self.effect,
            "match": {key: value for key, value in _match_items(self.match) if value is not None},
            "params": dict(self.params),
            "tag": self.tag,
            "candidates": self.candidates,
            "hits": self.hits,
        }


def _match_items(match: Match) -> list[tuple[str, Any]]:
    return [(key, getattr(match, key)) for key in MATCH_KEYS]


def parse_rule(rule_id: str, body: object) -> Rule:
    """Validate a JSON rule body and build the armed rule; raise ``RuleError`` naming the field."""
    if not isinstance(body, dict):
        raise RuleError(f"rule: expected a JSON object, got {type(body).__name__}")
    server = body.get("server")
    if not isinstance(server, str) or not server:
        raise RuleError(f"server: expected the name of the server the rule applies to, got {server!r}")
    effect = body.get("effect")
    if not isinstance(effect, str) or effect not in EFFECT_PARAMS:
        raise RuleError(f"effect: unknown effect {effect!r} (known: {', '.join(sorted(EFFECT_PARAMS))})")
    match = _parse_match(body.get("match") or {})
    allowed = EFFECT_PARAMS[effect]
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in ("server", "effect", "match", "seed", "tag"):
            continue
        if key not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise RuleError(f"{key}: unknown parameter for effect {effect!r} (known: {known})")
        types, _ = allowed[key]
        if isinstance(value, bool) or not isinstance(value, types):
            names = " or ".join("null" if kind is type(None) else kind.__name__ for kind in types)
            raise RuleError(f"{key}: expected {names}, got {value!r}")
        params[key] = value
    for key, (_, default) in allowed.items():
        params.setdefault(key, default)
    _check_effect_values(effect, params)
    seed = body.get("seed")
    if seed is None:
        seed = int(os.environ.get(SEED_ENV, "0") or 0)
    tag = body.get("tag")
    return Rule(
        id=rule_id,
        server=server,
        effect=effect,
        match=match,
        params=params,
        tag=str(tag) if tag is not None else None,
        rng=random.Random(f"{seed}:{rule_id}"),
    )


def _parse_match(raw: object) -> Match:
    if not isinstance(raw, dict):
        raise RuleError(f"match: expected an object with keys {', '.join(MATCH_KEYS)}, got {raw!r}")
    unknown = sorted(set(raw) - set(MATCH_KEYS))
    if unknown:
        raise RuleError(f"match.{unknown[0]}: unknown key (known: {', '.join(MATCH_KEYS)})")
    values: dict[str, Any] = {}
    for spec in MATCH:
        value = raw.get(spec.name)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, spec.types)
            or not spec.fits(value)
            or (spec.name == "route" and isinstance(value, str) and not value.startswith("/"))
        ):
            raise RuleError(f"match.{spec.name}: expected {spec.expected_values()}, got {value!r}")
        values[spec.name] = value
    if values["probability"] is not None:
        values["probability"] = float(values["probability"])
    return Match(**values)


def _check_effect_values(effect: str, params: Mapping[str, Any]) -> None:
    for spec in EFFECTS[effect].params:
        if not spec.fits(params[spec.name]):
            raise RuleError(f"{spec.name}: expected {spec.expected_values()}, got {params[spec.name]!r}")
