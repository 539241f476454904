"""The docs' example collectors: the "Writing a collector" page shows them verbatim, and they pass
catalog scenarios of both styles on the real stack (the gym and the native one, picked by the
scenario's style)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled

EXAMPLE = Path(__file__).with_name("collectors.py")
PAGE = Path(__file__).parents[2] / "docs" / "writing-a-collector.md"
SCENARIOS = (
    "baseline",
    "short-results",
    "nan-logprobs-nan",
    "trajectory-exception-isolated",
    "agent-frozen",
    "validation-batched-env",  # native style
)


def test_the_docs_show_the_example_collectors_verbatim() -> None:
    # The page includes the file itself (pymdownx.snippets), so what it shows is this file.
    assert "    --8<--\n    tests/examples/collectors.py\n    --8<--\n" in PAGE.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_example_collectors_pass_catalog_scenarios_of_both_styles(pytester: pytest.Pytester) -> None:
    catalog = bundled.catalog_dir()
    result = pytester.runpytest_subprocess(
        "--rollout-chaos",
        f"--rollout-chaos-target={EXAMPLE}:make_collector",
        "-p",
        "no:cacheprovider",
        *(str(catalog / f"{name}.chaos.yaml") for name in SCENARIOS),
        timeout=300,
    )
    result.assert_outcomes(passed=len(SCENARIOS))
    result.stdout.fnmatch_lines(
        ["invariants: * passed, 0 failed, 0 unknown*", "  batched_env_eval * 1 passed"]
    )
