"""A scenario's JUnit class name from its node id: pytest's rule for ``.py`` files, with the
``.chaos.yaml`` suffix dropped and no dot that is not a package boundary."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.report.junit import scenario_classname


@pytest.mark.parametrize(
    ("nodeid", "prefix", "classname"),
    [
        ("scenarios/short-results.chaos.yaml::short-results", None, "scenarios.short-results"),
        ("short-results.chaos.yaml::short-results", None, "short-results"),  # a built-in one
        ("short-results.chaos.yaml::short-results-fuzz-1", "ci", "ci.short-results"),
        ("/home/ci/chaos/my.run.chaos.yaml::my-run", None, "my_run"),  # outside the rootdir
        ("tests/test_x.py::test_y", None, None),  # pytest's own
    ],
)
def test_the_class_name_of_a_node_id(nodeid: str, prefix: str | None, classname: str | None) -> None:
    assert scenario_classname(nodeid, prefix) == classname
