"""The docs' example collectors. The "Writing a collector" page opens with a minimal collector
(read here from the page itself) and shows the complete one verbatim, which passes every scenario
of the catalog, of both styles, on the real stack (the gym and the native one, picked by the
scenario's style), except those that need Ray, which skip. The page has a heading per topic and
names what the invariants check, the truncation signal and ``prompts_sent`` among them."""

from __future__ import annotations

import ast
import asyncio
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import pytest_rollout_chaos
from pytest_rollout_chaos import ShortCountError, bundled
from tests._invariant_names import INTERFACE_NAMES
from tests.collector._fake_gym import FakeGym, context, rows
from tests.examples import _page

EXAMPLE = Path(__file__).with_name("collectors.py")
PAGE = _page.PAGE
# Their faults act on Ray actors and nodes: without --rollout-chaos-ray they skip, saying so.
NEEDS_RAY = {"agent-actor-restarted", "rollout-node-lost", "gym-host-partitioned", "policy-host-lost"}
FAILED_OR_SKIPPED = ("failure", "error", "skipped")  # a junit testcase's outcome elements


def test_the_docs_show_the_example_collectors_verbatim() -> None:
    # The page includes the file itself (pymdownx.snippets), so what it shows is this file.
    assert "    --8<--\n    tests/examples/collectors.py\n    --8<--\n" in PAGE.read_text(encoding="utf-8")


def test_the_page_has_a_heading_per_topic_with_the_minimal_collector_first() -> None:
    titles = _page.headings()
    assert titles[0] == _page.MINIMAL
    topics = ["The contract", "What the invariants check", "What `ctx` holds"]
    topics += ["Reusing the reference collector's pieces", "A complete collector", "How the results read"]
    assert [title for title in topics if title not in titles] == []


def test_the_page_names_the_truncation_signal_and_what_every_invariant_checks() -> None:
    checks = _page.section("What the invariants check")
    assert 'response.incomplete_details.reason == "max_output_tokens"' in checks
    assert "`prompts_sent`" in checks
    assert "id for id" in checks
    assert [name for name in INTERFACE_NAMES if f"`{name}`" not in checks] == []


def _minimal() -> types.ModuleType:
    module = types.ModuleType("chaos")
    exec(compile(_page.minimal_collector(), f"{PAGE.name} ({_page.MINIMAL})", "exec"), module.__dict__)
    return module


def test_the_minimal_collector_imports_public_names_only() -> None:
    public = {*pytest_rollout_chaos.__all__, "kit"}
    imported = [
        (node.module, alias.name)
        for node in ast.walk(ast.parse(_page.minimal_collector()))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]
    assert ("pytest_rollout_chaos", "kit") in imported
    private = [name for module, name in imported if module == "pytest_rollout_chaos" and name not in public]
    assert private == []


def test_the_minimal_collector_reads_every_row_and_raises_on_a_short_count() -> None:
    make_collector = _minimal().make_collector
    gym = FakeGym()
    rollouts = asyncio.run(make_collector(context(gym)).collect(rows(3), mode="train"))
    assert sorted((r.row_index, r.status, len(r.turns), r.reward) for r in rollouts) == [
        (index, "completed", 2, 1.0) for index in range(3)
    ]
    gym.short_by = 1
    with pytest.raises(ShortCountError, match="requested 3 results, the Gym client returned 2"):
        asyncio.run(make_collector(context(gym)).collect(rows(3), mode="train"))


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
        "-n",  # two workers: the catalog mostly waits on its faults' deadlines
        "2",
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
