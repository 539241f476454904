"""Fault kinds by name: an explicit tuple, a dict built from it, validation and JSON Schema.

No import side effects, no plugin discovery: adding a kind means adding its class to
``FAULT_TYPES``. ``build(kind, params)`` turns scenario input into a fault object and raises
``FaultParameterError`` naming the field and what is valid; ``parameters(kind)`` describes
the fields and ``json_schema(kind)`` turns that description into a JSON Schema.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.actor_kill import ActorKill
from pytest_rollout_chaos.faults.bandwidth import Bandwidth
from pytest_rollout_chaos.faults.base import Fault
from pytest_rollout_chaos.faults.cancel import Cancel
from pytest_rollout_chaos.faults.down import Down
from pytest_rollout_chaos.faults.exit_zero import ExitZero
from pytest_rollout_chaos.faults.freeze import Freeze
from pytest_rollout_chaos.faults.hang import Hang
from pytest_rollout_chaos.faults.host_lost import HostLost
from pytest_rollout_chaos.faults.http_error import HttpError
from pytest_rollout_chaos.faults.kill import Kill
from pytest_rollout_chaos.faults.latency import Latency
from pytest_rollout_chaos.faults.limit_data import LimitData
from pytest_rollout_chaos.faults.logprob_drift import LogprobDrift
from pytest_rollout_chaos.faults.malformed_json import MalformedJson
from pytest_rollout_chaos.faults.nan_logprobs import NanLogprobs
from pytest_rollout_chaos.faults.node_down import NodeDown
from pytest_rollout_chaos.faults.oom import Oom
from pytest_rollout_chaos.faults.partition import Partition
from pytest_rollout_chaos.faults.prefix_drift import PrefixDrift
from pytest_rollout_chaos.faults.reset_peer import ResetPeer
from pytest_rollout_chaos.faults.restart import Restart
from pytest_rollout_chaos.faults.short_results import ShortResults
from pytest_rollout_chaos.faults.slicer import Slicer
from pytest_rollout_chaos.faults.slow_close import SlowClose
from pytest_rollout_chaos.faults.slow_env import SlowEnv
from pytest_rollout_chaos.faults.timeout import Timeout
from pytest_rollout_chaos.faults.trajectory_exception import TrajectoryException

FAULT_TYPES: Final[tuple[type[Any], ...]] = (
    # network (Toxiproxy)
    Latency,
    Bandwidth,
    SlowClose,
    Timeout,
    ResetPeer,
    Slicer,
    LimitData,
    Down,
    # process
    Kill,
    Oom,
    Freeze,
    ExitZero,
    Restart,
    # Ray (the servers in Ray actors: --rollout-chaos-ray)
    ActorKill,
    NodeDown,
    # between hosts (--rollout-chaos-ray=hosts:N)
    HostLost,
    Partition,
    # semantic (fault hooks, Gym client)
    HttpError,
    NanLogprobs,
    LogprobDrift,
    PrefixDrift,
    MalformedJson,
    TrajectoryException,
    Hang,
    ShortResults,
    SlowEnv,
    # the caller's side
    Cancel,
)
FAULTS: Final[Mapping[str, type[Any]]] = {cls.kind: cls for cls in FAULT_TYPES}
JsonType = Literal["integer", "number", "string", "boolean"]


class FaultParameterError(FaultError):
    """Scenario input for a fault is invalid; ``field`` names the offending key (None: the kind)."""

    def __init__(self, message: str, *, kind: str | None, field: str | None) -> None:
        super().__init__(message)
        self.kind = kind
        self.field = field


@dataclass(frozen=True, slots=True)
class Parameter:
    """One field of a fault kind, as scenario authors see it."""

    name: str
    type: JsonType
    required: bool
    default: object
    nullable: bool
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None

    def describe(self) -> str:
        """``latency_ms: integer >= 0 (default 1000)`` for error messages and ``rollout-chaos list``."""
        text = f"{self.name}: {self.type}"
        if self.choices:
            text = f"{self.name}: one of {', '.join(self.choices)}"
        if self.minimum is not None:
            text += f" >= {self.minimum:g}"
        if self.maximum is not None:
            text += f" <= {self.maximum:g}"
        return text + (" (required)" if self.required else f" (default {self.default!r})")


def known_kinds() -> tuple[str, ...]:
    return tuple(sorted(FAULTS))


def fault_class(kind: str) -> type[Any]:
    """The class of ``kind``; unknown kinds list the known ones."""
    try:
        return FAULTS[kind]
    except (KeyError, TypeError):
        raise FaultParameterError(
            f"kind: unknown fault {kind!r} (known: {', '.join(known_kinds())})", kind=None, field="kind"
        ) from None


def parameters(kind: str) -> tuple[Parameter, ...]:
    """The parameters of ``kind`` in declaration order (``target`` first)."""
    cls = fault_class(kind)
    hints = typing.get_type_hints(cls)
    described = []
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        json_type, nullable, choices = _json_type(cls, item.name, hints[item.name])
        required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
        meta = item.metadata
        described.append(
            Parameter(
                name=item.name,
                type=json_type,
                required=required,
                default=None if required else item.default,
                nullable=nullable,
                help=str(meta.get("help", "server name, or link name for network faults")),
                choices=choices,
                minimum=meta.get("minimum"),
                maximum=meta.get("maximum"),
            )
        )
    return tuple(described)


def build(kind: str, params: Mapping[str, object]) -> Fault:
    """A fault of ``kind`` from scenario input (``target`` plus parameters), fully validated."""
    cls = fault_class(kind)
    spec = {parameter.name: parameter for parameter in parameters(kind)}
    unknown = sorted(set(params) - set(spec))
    if unknown:
        raise FaultParameterError(
            f"{unknown[0]}: unknown parameter for fault {kind!r} (valid: {', '.join(spec)})",
            kind=kind,
            field=unknown[0],
        )
    for parameter in spec.values():
        if parameter.required and parameter.name not in params:
            raise FaultParameterError(
                f"{parameter.name}: required by fault {kind!r} ({parameter.help})",
                kind=kind,
                field=parameter.name,
            )
    values = {name: _check(kind, spec[name], value) for name, value in params.items()}
    try:
        fault: Fault = cls(**values)
    except ValueError as error:  # a rule between parameters, stated by the fault class
        field_name = str(error).partition(":")[0]
        raise FaultParameterError(
            f"{error} (fault {kind!r})", kind=kind, field=field_name if field_name in spec else None
        ) from None
    return fault


def json_schema(kind: str) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) object for one fault step's parameters of ``kind``."""
    properties: dict[str, Any] = {"kind": {"const": kind}}
    for parameter in parameters(kind):
        schema: dict[str, Any] = {"description": parameter.help}
        if parameter.choices:
            schema["enum"] = list(parameter.choices)
        else:
            schema["type"] = [parameter.type, "null"] if parameter.nullable else parameter.type
        if parameter.minimum is not None:
            schema["minimum"] = parameter.minimum
        if parameter.maximum is not None:
            schema["maximum"] = parameter.maximum
        if not parameter.required:
            schema["default"] = parameter.default
        properties[parameter.name] = schema
    return {
        "type": "object",
        "properties": properties,
        "required": ["kind", *(p.name for p in parameters(kind) if p.required)],
        "additionalProperties": False,
    }


def _json_type(cls: type[Any], name: str, hint: Any) -> tuple[JsonType, bool, tuple[str, ...]]:
    args = typing.get_args(hint)
    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        nullable = type(None) in args
        remaining = [arg for arg in args if arg is not type(None)]
        if len(remaining) != 1:
            raise TypeError(f"{cls.__name__}.{name}: unsupported parameter type {hint!r}")
        hint = remaining[0]
    if typing.get_origin(hint) is Literal:
        return "string", nullable, tuple(str(choice) for choice in typing.get_args(hint))
    simple: dict[Any, JsonType] = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if hint not in simple:
        raise TypeError(f"{cls.__name__}.{name}: unsupported parameter type {hint!r}")
    return simple[hint], nullable, ()


def _check(kind: str, parameter: Parameter, value: object) -> object:
    def fail(expected: str) -> FaultParameterError:
        return FaultParameterError(
            f"{parameter.name}: expected {expected}, got {value!r} (fault {kind!r}: {parameter.help})",
            kind=kind,
            field=parameter.name,
        )

    if value is None:
        if parameter.nullable:
            return None
        raise fail(parameter.describe().split(": ", 1)[1])
    if parameter.choices:
        if value not in parameter.choices:
            raise fail(f"one of {', '.join(parameter.choices)}")
        return value
    kind_ok = {
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "string": isinstance(value, str),
    }[parameter.type]
    article = "an" if parameter.type == "integer" else "a"
    if not kind_ok:
        raise fail(f"{article} {parameter.type}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if parameter.minimum is not None and value < parameter.minimum:
            raise fail(f"{article} {parameter.type} >= {parameter.minimum:g}")
        if parameter.maximum is not None and value > parameter.maximum:
            raise fail(f"{article} {parameter.type} <= {parameter.maximum:g}")
        if parameter.type == "number":
            return float(value)
    return value
