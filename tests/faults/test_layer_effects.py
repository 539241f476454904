"""Each layer fault's parameters are its layer effect's, as ``servers.faultlayer.effects`` declares them.

A semantic fault is declared once: the layer's ``EFFECTS`` table holds its effect's parameters,
their defaults, bounds, choices and words, and the fault class reads them (``effect_param``).
The fault still lists its fields by name, so a parameter added on one side only must fail here,
naming the fault, the effect and the parameter.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults._layer_fault import LayerFault
from pytest_rollout_chaos.servers.faultlayer.effects import EFFECTS, MATCH, Effect
from pytest_rollout_chaos.servers.faultlayer.rules import parse_rule

LAYER_FAULTS: list[type[LayerFault]] = [cls for cls in registry.FAULT_TYPES if issubclass(cls, LayerFault)]
MATCH_NAMES = tuple(spec.name for spec in MATCH)
HINT = (
    "declare the parameter once, in EFFECTS (pytest_rollout_chaos/servers/faultlayer/effects.py), "
    "and give the fault a field read from it: name = effect_param(effect, name)"
)


def _effect_of(cls: type[LayerFault]) -> Effect:
    __tracebackhide__ = True
    if cls.effect not in EFFECTS:
        pytest.fail(
            f"{cls.__module__}.{cls.__name__} (kind {cls.kind!r}): effect {cls.effect!r} is not a layer "
            f"effect (known: {', '.join(EFFECTS)})",
            pytrace=False,
        )
    return EFFECTS[cls.effect]


def _own_parameters(cls: type[LayerFault]) -> dict[str, registry.Parameter]:
    """The fault's parameters as scenarios see them, less ``target`` and the match keys."""
    return {
        parameter.name: parameter
        for parameter in registry.parameters(cls.kind)
        if parameter.name != "target" and parameter.name not in MATCH_NAMES
    }


def test_the_layer_faults_are_found() -> None:
    assert {cls.kind for cls in LAYER_FAULTS} >= {"http_error", "nan_logprobs", "slow_env"}


@pytest.mark.parametrize("cls", LAYER_FAULTS, ids=lambda cls: cls.kind)
def test_a_layer_faults_parameters_are_its_effects(cls: type[LayerFault]) -> None:
    effect = _effect_of(cls)
    own = _own_parameters(cls)
    declared = {spec.name: spec for spec in effect.params}
    where = f"fault {cls.kind!r} ({cls.__module__}.{cls.__name__}) and layer effect {effect.name!r}"
    problems = [
        f"{name}: a parameter of the fault only (the layer would refuse it)"
        for name in own
        if name not in declared
    ]
    problems += [
        f"{name}: a parameter of the effect only (the fault never sends it)"
        for name in declared
        if name not in own
    ]
    problems += [
        f"{name}: choices differ: fault {own[name].choices}, effect {spec.choices}"
        for name, spec in declared.items()
        if name in own and own[name].choices != spec.choices
    ]
    problems += [
        f"{name}: words differ: fault {own[name].help!r}, effect {spec.help!r}"
        for name, spec in declared.items()
        if name in own and own[name].help != spec.help
    ]
    if problems:
        pytest.fail(f"{where} disagree:\n  " + "\n  ".join(problems) + f"\n{HINT}", pytrace=False)


@pytest.mark.parametrize("cls", LAYER_FAULTS, ids=lambda cls: cls.kind)
def test_a_layer_faults_match_keys_are_the_layers(cls: type[LayerFault]) -> None:
    names = [parameter.name for parameter in registry.parameters(cls.kind)]
    assert [name for name in names if name in MATCH_NAMES] == list(MATCH_NAMES)
    by_name = {parameter.name: parameter for parameter in registry.parameters(cls.kind)}
    for spec in MATCH:
        assert (by_name[spec.name].help, by_name[spec.name].minimum, by_name[spec.name].maximum) == (
            spec.help,
            spec.minimum,
            spec.maximum,
        ), f"match key {spec.name!r} of fault {cls.kind!r}"


@pytest.mark.parametrize("cls", LAYER_FAULTS, ids=lambda cls: cls.kind)
def test_the_rule_a_layer_fault_sends_is_one_the_layer_takes(cls: type[LayerFault]) -> None:
    """Its defaults and every choice go through the layer's own parsing, with the fault's match."""
    fault: Any = registry.build(cls.kind, {"target": "s", "row": 1, "nth": 2, "every": 3, "count": 4})
    variants = [fault] + [
        dataclasses.replace(fault, **{name: choice})
        for name, parameter in _own_parameters(cls).items()
        for choice in parameter.choices
    ]
    for variant in variants:
        sent = variant.effect_params()
        assert set(sent) == {spec.name for spec in _effect_of(cls).params}
        rule = parse_rule("r1", {"server": "s", "effect": cls.effect, "match": variant.match(), **sent})
        assert rule.params == sent
