"""A failure reads as its story first: the servers' log tails it shows are those the story names.

The README's example failure (a known-bug collector on ``short-results``), run for real in a child
pytest: at least half of its failure text, by lines, is the story, not log tails; the servers its
evidence names are shown, and Toxiproxy's connection lines are not.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.catalog._verdicts import REPO

# README.md, "A failure as it reads"
EXAMPLE = ("fixtures/collectors/silent_short_count.py:factory", "short-results")
SECTION = re.compile(r"^-+ (?:setup|call|teardown) (?P<title>.+?) -+$")


def story_and_total(output: str, scenario: str) -> tuple[int, int]:
    """Lines of ``scenario``'s failure text that are its story (up to its first report section, such
    as a server's log tail) and lines in all, from its header to the next failure or pytest section."""
    lines = output.splitlines()
    start = next(at for at, line in enumerate(lines) if re.fullmatch(rf"_+ scenario: {scenario} _+", line))
    end = next(
        (at for at in range(start + 1, len(lines)) if lines[at].startswith(("_____", "====="))), len(lines)
    )
    block = lines[start + 1 : end]
    story = next((at for at, line in enumerate(block) if SECTION.match(line)), len(block))
    return story, len(block)


def section_titles(output: str) -> list[str]:
    return [match["title"] for line in output.splitlines() if (match := SECTION.match(line))]


@pytest.mark.slow
def test_the_readme_failure_is_at_least_half_story(tmp_path: Path) -> None:
    target, scenario = EXAMPLE
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}"]
    command += ["--rollout-chaos", f"--rollout-chaos-target={target}", f"scenarios/{scenario}.chaos.yaml"]
    child = subprocess.run(
        command,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert child.returncode == pytest.ExitCode.TESTS_FAILED, child.stdout[-4000:] + child.stderr[-2000:]
    story, total = story_and_total(child.stdout, scenario)
    assert story * 2 >= total, f"{story} of {total} lines are the story:\n{child.stdout}"
    titles = section_titles(child.stdout)
    # the evidence names the resources server and a server the rows ran through (the calculator
    # agent, or under load the model server whose records come last); the Gym client's fault no server
    assert "gym_resources log (last 20 lines)" in titles
    assert {"calculator_agent log (last 20 lines)", "gym_model log (last 20 lines)"} & set(titles), titles
    assert "toxiproxy log (last 20 lines)" not in titles
    assert titles[-1] == "server logs"  # which were left out, and where every log is
