"""Rules between a fault's parameters are scenario errors at validation time, naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.registry import FaultParameterError
from pytest_rollout_chaos.faults.slicer import Slicer
from pytest_rollout_chaos.scenario import ScenarioFileError, parse_scenario

LINK = "agent->model"


@pytest.mark.parametrize(("average", "variation"), [(8, 8), (8, 9)])
def test_a_rule_between_parameters_names_its_field_and_both_values(average: int, variation: int) -> None:
    with pytest.raises(FaultParameterError) as info:
        registry.build(
            "slicer", {"target": LINK, "average_size_bytes": average, "size_variation_bytes": variation}
        )
    assert (info.value.kind, info.value.field) == ("slicer", "size_variation_bytes")
    assert str(info.value) == (
        f"size_variation_bytes: must be smaller than average_size_bytes ({variation} >= {average}) "
        "(fault 'slicer')"
    )


def test_a_valid_combination_builds_the_fault_with_those_values() -> None:
    fault = registry.build("slicer", {"target": LINK, "average_size_bytes": 8, "size_variation_bytes": 7})
    assert fault == Slicer(target=LINK, average_size_bytes=8, size_variation_bytes=7)
    assert isinstance(fault, Slicer)
    assert fault.attributes() == {"average_size": 8, "size_variation": 7, "delay": 0}


def test_the_rule_is_a_validation_problem_at_the_line_of_its_field() -> None:
    text = (
        "name: base\ndescription: d\nexpect:\n  invariants: [accounted]\nfaults:\n"
        f"  - kind: slicer\n    target: {LINK}\n    average_size_bytes: 8\n    size_variation_bytes: 8\n"
    )
    with pytest.raises(ScenarioFileError) as caught:
        parse_scenario(text, Path("s.chaos.yaml"))
    assert [str(problem) for problem in caught.value.problems] == [
        "s.chaos.yaml:9: faults[0].size_variation_bytes: must be smaller than average_size_bytes (8 >= 8) "
        "(fault 'slicer')"
    ]
