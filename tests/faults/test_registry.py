"""The registry: every kind of the catalog, clear errors for bad input, a JSON Schema per kind."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.base import Family, Fault, Need, Preflight, Terminating
from pytest_rollout_chaos.faults.latency import Latency
from pytest_rollout_chaos.faults.nan_logprobs import NanLogprobs

CATALOG = [
    "latency",
    "bandwidth",
    "slow_close",
    "timeout",
    "reset_peer",
    "slicer",
    "limit_data",
    "down",
    "kill",
    "oom",
    "freeze",
    "exit_zero",
    "restart",
    "actor_kill",
    "node_down",
    "host_lost",
    "partition",
    "http_error",
    "nan_logprobs",
    "logprob_drift",
    "prefix_drift",
    "malformed_json",
    "trajectory_exception",
    "hang",
    "short_results",
    "slow_env",
    "cancel",
]


def test_every_catalog_kind_is_registered_once_and_follows_the_contract() -> None:
    assert sorted(registry.FAULTS) == sorted(CATALOG)
    assert len(registry.FAULT_TYPES) == len(CATALOG)
    for cls in registry.FAULT_TYPES:
        params = dataclasses.fields(cls)[0]
        assert params.name == "target", cls
        assert cls.__dataclass_params__.frozen, cls
        assert isinstance(cls(target="x"), Fault), cls


def test_every_fault_declares_its_family_targets_and_needs() -> None:
    for cls in registry.FAULT_TYPES:
        assert cls.family in typing.get_args(Family), cls
        assert cls.targets in ("links", "servers") or (isinstance(cls.targets, tuple) and cls.targets), cls
        assert cls.needs, cls
        assert all(isinstance(need, Need) for need in cls.needs), cls


def test_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(
        registry.FaultParameterError, match=r"unknown fault 'latncy' \(known: actor_kill, bandwidth, "
    ) as info:
        registry.build("latncy", {"target": "x"})
    assert info.value.field == "kind"


def test_build_validates_and_converts() -> None:
    fault = registry.build("latency", {"target": "model", "latency_ms": 800, "jitter_ms": 5})
    assert fault == Latency(target="model", latency_ms=800, jitter_ms=5)
    assert registry.build("slow_env", {"target": "env", "delay_ms": 5}) == registry.FAULTS["slow_env"](
        target="env", delay_ms=5.0
    )


@pytest.mark.parametrize(
    ("kind", "params", "field", "message"),
    [
        ("latency", {"latency_ms": -1}, "latency_ms", r"latency_ms: expected an integer >= 0, got -1"),
        ("latency", {"latency_ms": "fast"}, "latency_ms", r"latency_ms: expected an integer, got 'fast'"),
        ("latency", {"latency_ms": True}, "latency_ms", r"expected an integer, got True"),
        ("latency", {"latncy_ms": 5}, "latncy_ms", r"unknown parameter .* \(valid: target, stream, "),
        ("nan_logprobs", {"shape": "NaN"}, "shape", r"expected one of nan, null, inf, http_500"),
        ("http_error", {"status": 200}, "status", r"status: expected an integer >= 400"),
        ("hang", {"probability": 1.5}, "probability", r"<= 1"),
        ("kill", {}, "target", None),
    ],
)
def test_bad_parameters_name_the_field_and_what_is_valid(
    kind: str, params: dict[str, object], field: str, message: str | None
) -> None:
    given = params if field == "target" else {"target": "x", **params}
    with pytest.raises(registry.FaultParameterError) as info:
        registry.build(kind, given)
    assert info.value.field == field
    assert info.value.kind == kind
    if message:
        assert info.match(message)


def test_parameters_describe_types_defaults_and_choices() -> None:
    by_name = {parameter.name: parameter for parameter in registry.parameters("nan_logprobs")}
    assert by_name["target"].required
    assert by_name["shape"].choices == ("nan", "null", "inf", "http_500")
    assert by_name["shape"].default == "nan"
    assert by_name["token_index"].nullable
    assert by_name["token_index"].type == "integer"
    assert by_name["probability"].maximum == 1.0
    assert by_name["route"].help


def test_json_schema_of_a_kind() -> None:
    schema = registry.json_schema("nan_logprobs")
    assert schema["required"] == ["kind", "target"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["kind"] == {"const": "nan_logprobs"}
    assert schema["properties"]["shape"]["enum"] == ["nan", "null", "inf", "http_500"]
    assert schema["properties"]["token_index"]["type"] == ["integer", "null"]
    assert set(schema["properties"]) == {"kind", *(f.name for f in dataclasses.fields(NanLogprobs))}


def test_capabilities_are_declared_where_they_apply() -> None:
    faults = {kind: cls(target="x") for kind, cls in registry.FAULTS.items()}
    assert sorted(kind for kind, fault in faults.items() if isinstance(fault, Terminating)) == [
        "actor_kill",
        "exit_zero",
        "host_lost",
        "kill",
        "node_down",
        "oom",
    ]
    assert all(isinstance(fault, Preflight) for fault in faults.values())
