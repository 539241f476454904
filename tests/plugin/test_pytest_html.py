"""Where pytest-html is installed and writes its report (``--html``), each scenario's row there
carries our section of it as an extra: the outcome, the verdicts, the failure's story and the
timeline picture, in a frame with its own stylesheet. pytest-html is not a dependency: without it
(or without ``--html``) nothing changes."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.plugin._report_project import make_project

pytest.importorskip("pytest_html", reason="pytest-html is not installed (the [test] extra has it)")


def _rows(page: Path) -> dict[str, list[dict[str, Any]]]:
    """pytest-html's data for each test, read back from the page it wrote."""
    blob = re.search(r'data-jsonblob="([^"]*)"', page.read_text(encoding="utf-8"))
    assert blob is not None, "pytest-html wrote no data"
    tests: dict[str, list[dict[str, Any]]] = json.loads(html.unescape(blob[1]))["tests"]
    return tests


def _frames(entries: list[dict[str, Any]]) -> list[str]:
    """The pages of the frames among a test's extras, unescaped."""
    contents = [extra["content"] for entry in entries for extra in entry["extras"]]
    found = [re.search(r'srcdoc="([^"]*)"', content) for content in contents]
    return [html.unescape(match[1]) for match in found if match is not None]


def test_each_scenario_row_carries_its_story_and_timeline(pytester: pytest.Pytester) -> None:
    make_project(pytester, "all-complete", "loses-a-row")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("--rollout-chaos", "--html=page.html", "--self-contained-html", ".")
    result.assert_outcomes(passed=2, failed=1)
    rows = _rows(pytester.path / "page.html")
    by_name = {test_id.rsplit("::", 1)[1]: _frames(entries) for test_id, entries in rows.items()}
    assert by_name["test_plain"] == []  # a test that is no scenario gets nothing
    (passed,) = by_name["all-complete"]
    assert '<svg class="timeline"' in passed
    assert "timeline of all-complete" in passed
    assert '<span class="status pass">PASS</span>' in passed
    (failed,) = by_name["loses-a-row"]
    assert '<span class="status fail">FAIL</span>' in failed
    assert "scenario &#x27;loses-a-row&#x27; failed" in failed  # the story, escaped in the frame's page
    assert "<style>" in failed  # our stylesheet goes with it, inside the frame only


def test_without_html_no_extra_is_made(pytester: pytest.Pytester) -> None:
    make_project(pytester, "all-complete")
    pytester.makeconftest(
        pytester.path.joinpath("conftest.py").read_text()
        + "\n\ndef pytest_runtest_logreport(report):\n"
        + "    if report.when == 'call':\n"
        + "        print('EXTRAS', len(getattr(report, 'extras', [])))\n"
    )
    result = pytester.runpytest("--rollout-chaos", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*EXTRAS 0*"])
