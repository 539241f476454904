"""The docs' example collectors: the "Writing a collector" page shows them verbatim, and they pass
every scenario of the catalog, of both styles, on the real stack (the gym and the native one,
picked by the scenario's style), except those that need Ray, which skip."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled

EXAMPLE = Path(__file__).with_name("collectors.py")
PAGE = Path(__file__).parents[2] / "docs" / "writing-a-collector.md"
# Their faults act on Ray actors and nodes: without --rollout-chaos-ray they skip, saying so.
NEEDS_RAY = {"agent-actor-restarted", "rollout-node-lost"}
FAILED_OR_SKIPPED = ("failure", "error", "skipped")  # a junit testcase's outcome elements


def test_the_docs_show_the_example_collectors_verbatim() -> None:
    # The page includes the file itself (pymdownx.snippets), so what it shows is this file.
    assert "    --8<--\n    tests/examples/collectors.py\n    --8<--\n" in PAGE.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_example_collectors_pass_the_whole_catalog(pytester: pytest.Pytester) -> None:
    catalog = bundled.catalog_dir()
    scenarios = {path.name.removesuffix(".chaos.yaml") for path in catalog.glob("*.chaos.yaml")}
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "--rollout-chaos",
        f"--rollout-chaos-target={EXAMPLE}:make_collector",
        "-p",
        "no:cacheprovider",
        "-rs",
        f"--junitxml={junit}",
        str(catalog),
        timeout=600,
    )
    outcomes = {
        case.attrib["name"]: next((child.tag for child in case if child.tag in FAILED_OR_SKIPPED), "passed")
        for case in ET.parse(junit).getroot().iter("testcase")
    }
    assert set(outcomes) == scenarios
    not_passed = {name: outcome for name, outcome in outcomes.items() if outcome != "passed"}
    assert not_passed == dict.fromkeys(NEEDS_RAY, "skipped"), result.stdout.str()
    result.assert_outcomes(passed=len(scenarios) - len(NEEDS_RAY), skipped=len(NEEDS_RAY))
    ray_skip = "SKIPPED * does not run in a Ray actor in this run (pass --rollout-chaos-ray=*)"
    result.stdout.fnmatch_lines([ray_skip] * len(NEEDS_RAY))
    result.stdout.fnmatch_lines(["invariants: * passed, 0 failed, 0 unknown*", "  batched_env_eval * passed"])
