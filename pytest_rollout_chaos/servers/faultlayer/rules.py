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
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

SEED_ENV: Final = "ROLLOUT_CHAOS_SEED"

# effect -> {parameter: (types, default)}; a default of ... means required.
EFFECT_PARAMS: Final[Mapping[str, Mapping[str, tuple[tuple[type, ...], Any]]]] = {
    "http_error": {"status": ((int,), 500), "body": ((str, dict, list, type(None)), None)},
    "delay": {"delay_ms": ((int, float), 0), "per_item_ms": ((int, float), 0)},
    "nan_logprobs": {"shape": ((str,), "nan"), "token_index": ((int, type(None)), None)},
    "prefix_drift": {"mode": ((str,), "replace"), "replacement_token_id": ((int, type(None)), None)},
    "malformed_json": {"style": ((str,), "truncate")},
    "hang": {"max_hang_s": ((int, float, type(None)), None)},
    "trajectory_exception": {"message": ((str,), "injected trajectory exception")},
}
LOGPROB_SHAPES: Final = ("nan", "null", "inf", "http_500")
DRIFT_MODES: Final = ("replace", "merge", "end_of_turn")
MALFORMED_STYLES: Final = ("truncate", "garble")
MATCH_KEYS: Final = ("route", "row", "nth", "every", "probability", "count")


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
    route = raw.get("route")
    if route is not None and (not isinstance(route, str) or not route.startswith("/")):
        raise RuleError(f"match.route: expected a path starting with '/', got {route!r}")
    ints: dict[str, int | None] = {}
    for key, minimum in (("row", 0), ("nth", 1), ("every", 1), ("count", 1)):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
            raise RuleError(f"match.{key}: expected an integer >= {minimum}, got {value!r}")
        ints[key] = value
    probability = raw.get("probability")
    if probability is not None and (
        isinstance(probability, bool)
        or not isinstance(probability, int | float)
        or not 0.0 <= probability <= 1.0
    ):
        raise RuleError(f"match.probability: expected a number in [0, 1], got {probability!r}")
    return Match(
        route=route,
        row=ints["row"],
        nth=ints["nth"],
        every=ints["every"],
        probability=float(probability) if probability is not None else None,
        count=ints["count"],
    )


def _check_effect_values(effect: str, params: Mapping[str, Any]) -> None:
    choices = {
        ("nan_logprobs", "shape"): LOGPROB_SHAPES,
        ("prefix_drift", "mode"): DRIFT_MODES,
        ("malformed_json", "style"): MALFORMED_STYLES,
    }
    for (owner, key), valid in choices.items():
        if owner == effect and params[key] not in valid:
            raise RuleError(f"{key}: expected one of {', '.join(valid)}, got {params[key]!r}")
    if effect == "http_error" and not 400 <= params["status"] <= 599:
        raise RuleError(f"status: expected an HTTP error status 400..599, got {params['status']!r}")
    for key in ("delay_ms", "per_item_ms", "max_hang_s"):
        value = params.get(key)
        if value is not None and value < 0:
            raise RuleError(f"{key}: expected a number >= 0, got {value!r}")
