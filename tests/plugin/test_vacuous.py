"""A scenario that tested nothing fails as vacuous, on the real stack: retokenization-drift with a
model server that splices (so no prompt drifts) never passes silently; it names the witness it
did not see."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CATALOG = Path(__file__).resolve().parents[2] / "scenarios"


def test_retokenization_drift_without_drift_fails_as_vacuous(pytester: pytest.Pytester) -> None:
    text = (CATALOG / "retokenization-drift.chaos.yaml").read_text(encoding="utf-8")
    assert "splice_prefix: false" in text
    splicing = text.replace("splice_prefix: false", "splice_prefix: true")
    pytester.makefile(".chaos.yaml", **{"no-drift": splicing})
    result = pytester.runpytest("--rollout-chaos", "no-drift.chaos.yaml", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "VacuousScenarioError:",
            "  not judged (the scenario tested nothing there):",
            "    prompt_ids_drifted: NOT_SEEN: 0 rows whose prompt ids drifted between turns, at least 1 "
            "needed (the fault layer's record of /run answers)",
            "hint: the run did not produce what the scenario tests*",
        ]
    )
