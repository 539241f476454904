"""The registry: exactly the interface's names, an unknown name answered with the known ones, and the
standing invariants judged after a scenario's own list, each once."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.invariants import NAMES, get, registry
from tests._invariant_names import INTERFACE_NAMES


def test_registry_has_exactly_the_interface_names() -> None:
    assert NAMES == INTERFACE_NAMES
    with pytest.raises(KeyError, match=r"unknown invariant 'acounted' \(known: accounted, "):
        get("acounted")


def test_standing_invariants_follow_the_listed_ones_each_once() -> None:
    assert set(registry.STANDING) <= set(registry.NAMES)
    rest = tuple(name for name in registry.STANDING if name != "accounted")
    assert registry.judged(["bounded", "accounted"]) == ("bounded", "accounted", *rest)
    assert "raise_has_cause" in rest
    assert registry.judged(["raise_has_cause", "bounded"])[:2] == ("raise_has_cause", "bounded")
    assert registry.judged(["raise_has_cause", "bounded"]).count("raise_has_cause") == 1
    assert registry.judged([]) == registry.STANDING
