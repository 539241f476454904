"""Fault parameters, read from the fault registry: the registered dataclass's fields are the parameters.

``pytest_rollout_chaos.faults.registry`` is the only source of truth: this module turns its
``parameters(kind)`` description into ``Spec`` objects (for line-aware messages and the JSON
Schema) and lets ``registry.build`` have the last word on a step. No second table of
parameters is kept here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, Final

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.scenario import spec as s

# Fields of a fault class that are step keys of the scenario format, not parameters.
STEP_KEYS: Final = ("kind", "target", "at", "duration_s", "expect_hits")

FaultParameterError = registry.FaultParameterError


@dataclasses.dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a fault kind."""

    name: str
    spec: s.Spec
    required: bool
    default: Any
    nullable: bool
    help: str


def fault_kinds() -> tuple[str, ...]:
    """Every valid fault kind, in the registry's order."""
    return tuple(registry.FAULTS)


@functools.cache
def param_specs(kind: str) -> dict[str, Param]:
    """The parameters of ``kind`` by name (step keys excluded)."""
    params: dict[str, Param] = {}
    for parameter in registry.parameters(kind):
        if parameter.name in STEP_KEYS:
            continue
        params[parameter.name] = Param(
            name=parameter.name,
            spec=_spec_of(parameter),
            required=parameter.required,
            default=parameter.default,
            nullable=parameter.nullable,
            help=parameter.help,
        )
    return params


def default_route(kind: str) -> str | None:
    """The request path a fault-layer fault of ``kind`` hits when its step names no ``route``."""
    route = getattr(registry.fault_class(kind), "default_route", None)
    return route if isinstance(route, str) else None


def build_fault(kind: str, target: str, params: Mapping[str, Any]) -> object:
    """The fault object, so that the registry's own checks run at validation time.

    Raises ``FaultParameterError`` (its ``field`` names the key) when the registry rejects it.
    """
    return registry.build(kind, {"target": target, **params})


def _spec_of(parameter: registry.Parameter) -> s.Spec:
    if parameter.choices:
        return s.Choice(parameter.choices, what=parameter.name)
    if parameter.type == "boolean":
        return s.Boolean()
    if parameter.type == "integer":
        return s.Integer(
            minimum=None if parameter.minimum is None else int(parameter.minimum),
            maximum=None if parameter.maximum is None else int(parameter.maximum),
        )
    if parameter.type == "number":
        return s.Number(minimum=parameter.minimum, maximum=parameter.maximum)
    return s.Text(what="a string", allow_empty=True)
