"""A collector's raise is told with where it broke: the innermost frame in the expectation a gate
quotes, the last frames of the traceback in the failure text (a trainer's own code, not ours)."""

from __future__ import annotations

from pathlib import Path

from pytest_rollout_chaos.engine import story, verdicts
from pytest_rollout_chaos.engine.expectations import raised_at
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.scenario import load_scenario
from tests.invariants._builders import rows

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def effective_response_length(samples: list[object]) -> list[object]:
    return [sample.effective_response_length for sample in samples]  # type: ignore[attr-defined]


def raised() -> AttributeError:
    try:
        effective_response_length([[object()]])
    except AttributeError as error:
        return error
    raise AssertionError("no AttributeError")


def test_the_innermost_frame_is_named_with_its_file_line_and_function() -> None:
    error = raised()
    assert raised_at(error).startswith(" (at tests/engine/test_raised_at.py:")
    assert raised_at(error).endswith(", in <listcomp>)") or raised_at(error).endswith(
        ", in effective_response_length)"
    )
    assert raised_at(AttributeError("never raised")) == ""


def test_the_failure_text_shows_the_raise_and_the_expectation_where_it_broke() -> None:
    scenario = load_scenario(SCENARIOS / "trajectory-exception-isolated.chaos.yaml")
    history = History()
    result = ScenarioResult(scenario, rows(4), history, raised=raised(), started_at=history.t0, elapsed_s=0.4)
    verdicts.judge(result)
    text = story.failure_text(result)
    assert "raised at (the collector's last " in text
    assert "sample.effective_response_length for sample in samples" in text
    assert "in effective_response_length" in text
    expected = [line for line in text.splitlines() if "rollouts to come back" in line]
    assert expected
    assert "(at tests/engine/test_raised_at.py:" in expected[0]
