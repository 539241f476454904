"""Judging a run: standing invariants judge every scenario, and one that judged nothing of what it
lists or witnesses fails as vacuous, unless it says why (``expect.not_judged``) or the invariant
does not apply to the collector by what it declares (``fit.inapplicable``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_rollout_chaos.collector.abilities import declared
from pytest_rollout_chaos.collector.protocol import Rollout, Turn
from pytest_rollout_chaos.engine import fit, story, verdicts
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.errors import InvariantViolation, VacuousScenarioError
from pytest_rollout_chaos.history import History, fingerprint
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.concurrency_bounded import UNDECLARED
from pytest_rollout_chaos.invariants.registry import STANDING
from pytest_rollout_chaos.scenario import parse_scenario
from tests.invariants._builders import rollout, rows, turns
from tests.invariants._records import LINK, run_answered

ONE_TURN = [Turn([1, 5, 6], [7, 8, 2], [-0.1, -0.2, -0.3])]
FAULT = "faults:\n  - {kind: latency, target: agent->model, latency_ms: 1}\n"


def judged(
    expect: str,
    rollouts: Sequence[Rollout],
    history: History,
    *,
    faults: str = FAULT,
    collector: object = None,
    limit: int | None = None,
) -> ScenarioResult:
    """``expect`` (the lines under ``expect:``) judged against rollouts the collector returned; the
    fault step only spares the file a witness (nothing here checks that it acted). ``collector``:
    what the collector under test declares (``fit.inapplicable``); ``limit``: the concurrency it
    declares it keeps."""
    scenario = parse_scenario(f"name: s\ndescription: d\n{faults}expect:\n{expect}", Path("s.chaos.yaml"))
    result = ScenarioResult(
        scenario,
        rows(len(rollouts)),
        history,
        rollouts=list(rollouts),
        elapsed_s=0.5,
        concurrency_limit=limit,
        not_applicable=fit.inapplicable(declared(collector)),
    )
    verdicts.judge(result)
    return result


def answered(*given: Sequence[Turn]) -> History:
    """Each row's ``/run`` answered with the turns given for it, as the fault layer records it."""
    history = History()
    for row, generated in enumerate(given):
        run_answered(history, row, generated)
    return history


def test_a_listed_invariant_that_judged_nothing_fails_the_scenario_as_vacuous() -> None:
    mixed = judged(
        "  invariants: [prefix_consistent]\n",
        [rollout(0, turns=ONE_TURN), rollout(1)],
        answered(ONE_TURN, turns()),
    )
    assert (mixed.vacuous, mixed.passed) == ([], True)
    single = judged(
        "  invariants: [prefix_consistent]\n",
        [rollout(0, turns=ONE_TURN), rollout(1, turns=ONE_TURN)],
        answered(ONE_TURN, ONE_TURN),
    )
    assert single.vacuous == [
        "prefix_consistent: NOT_JUDGED: no returned rollout has two turns or more, so no prefix had to "
        "be kept"
    ]
    assert not single.passed
    with pytest.raises(VacuousScenarioError) as caught:
        story.raise_for(single)
    text = str(caught.value)
    assert "not judged (the scenario tested nothing there):\n  prefix_consistent: NOT_JUDGED: " in text
    assert "expect.not_judged: {name: reason}" in text


def test_a_reason_in_not_judged_lets_a_listed_invariant_judge_nothing() -> None:
    expect = (
        "  invariants: [prefix_consistent]\n"
        "  not_judged: {prefix_consistent: the model may answer in one turn}\n"
    )
    one_turn = [rollout(0, turns=ONE_TURN), rollout(1, turns=ONE_TURN)]
    result = judged(expect, one_turn, answered(ONE_TURN, ONE_TURN))
    assert (result.vacuous, result.passed) == ([], True)
    story.raise_for(result)


def test_standing_invariants_judge_every_scenario_after_the_listed_ones() -> None:
    history = answered(turns(), turns())
    result = judged("  invariants: [bounded]\n", [rollout(0), rollout(1)], history)
    assert [verdict.name for verdict in result.verdicts] == ["bounded", *STANDING]
    assert result.passed
    no_turns = judged("  invariants: [bounded]\n", [rollout(0), rollout(1, turns=[], reward=0.5)], history)
    with pytest.raises(InvariantViolation) as caught:
        story.raise_for(no_turns)
    text = str(caught.value)
    assert "rewards_recorded: FAIL: 1 rollouts carry a reward their row's /run did not answer" in text
    assert "corroborated: FAIL" in text


def test_a_standing_invariant_that_judged_nothing_is_silent() -> None:
    native = History()
    for row in (0, 1):
        for turn in turns():
            facts = {"link": "collector->policy", "row": row, "status": 200}
            generated = {"generations": [fingerprint(turn.generation_token_ids)]}
            native.append("policy", "ok", "POST /v1/chat/completions", {**facts, **generated})
    result = judged("  invariants: [bounded]\n", [rollout(0), rollout(1)], native)
    statuses = {verdict.name: verdict.status for verdict in result.verdicts}
    assert statuses["rewards_recorded"] is Status.NOT_JUDGED
    assert (result.vacuous, result.passed) == ([], True)
    story.raise_for(result)


def test_a_witness_not_seen_fails_the_scenario_as_vacuous() -> None:
    expect = "  invariants: [bounded]\n  witness: {prompt_ids_drifted: 1}\n"
    result = judged(expect, [rollout(0)], answered(turns()), faults="")
    assert result.vacuous == [
        "prompt_ids_drifted: NOT_SEEN: 0 rows whose prompt ids drifted between turns, at least 1 needed "
        "(the fault layer's record of /run answers)"
    ]
    with pytest.raises(VacuousScenarioError, match="prompt_ids_drifted: NOT_SEEN"):
        story.raise_for(result)


def test_a_failure_and_what_was_not_judged_are_told_together() -> None:
    result = judged(
        "  invariants: [isolated_failures]\n",
        [rollout(0), rollout(1, turns=[], reward=0.5)],
        answered(turns(), turns()),
    )
    with pytest.raises(InvariantViolation) as caught:
        story.raise_for(result)
    text = str(caught.value)
    assert "invariants:\n  corroborated: FAIL" in text
    assert "not judged (the scenario tested nothing there):\n  isolated_failures: NOT_JUDGED: " in text


class OwnConcurrency:
    own_concurrency = "its trainer's rollout semaphore"


def all_in_flight(count: int) -> History:
    """Each row's ``/run`` sent before any is answered, as the fault layer records them."""
    history = History()
    for row in range(count):
        facts = {"link": LINK, "row": row}
        history.append("calculator_agent", "invoke", "POST /run", facts, request_id=f"run-{row}")
    for row in range(count):
        facts = {"link": LINK, "row": row, "status": 200}
        history.append("calculator_agent", "ok", "POST /run", facts, request_id=f"run-{row}")
    return history


def test_an_invariant_that_does_not_apply_to_the_collector_says_why_and_the_rest_judge_the_run() -> None:
    listed = "  invariants: [concurrency_bounded, bounded]\n"
    history = answered(turns(), turns())
    own = judged(listed, [rollout(0), rollout(1)], history, collector=OwnConcurrency)
    verdict = next(verdict for verdict in own.verdicts if verdict.name == "concurrency_bounded")
    assert verdict.status is Status.NOT_JUDGED
    assert verdict.summary.startswith("not applicable: the collector under test keeps its own concurrency")
    assert verdict.summary.endswith("its trainer's rollout semaphore (its own_concurrency)")
    others = [name for name in STANDING if name != "concurrency_bounded"]
    assert [verdict.name for verdict in own.verdicts] == ["concurrency_bounded", "bounded", *others]
    assert (own.vacuous, own.passed) == ([], True)
    story.raise_for(own)
    # the same run from a collector that declares nothing: nothing excuses the listed invariant
    silent = judged(listed, [rollout(0), rollout(1)], history)
    assert silent.vacuous == [f"concurrency_bounded: NOT_JUDGED: {UNDECLARED}"]
    with pytest.raises(VacuousScenarioError, match="concurrency_bounded: NOT_JUDGED: the collector declares"):
        story.raise_for(silent)


def test_a_collector_that_declares_a_limit_and_exceeds_it_fails() -> None:
    rollouts = [rollout(row) for row in range(3)]
    result = judged("  invariants: [concurrency_bounded]\n", rollouts, all_in_flight(3), limit=2)
    [verdict] = [verdict for verdict in result.verdicts if verdict.name == "concurrency_bounded"]
    assert verdict.status is Status.FAIL, verdict
    assert "3 /run requests were in flight at once, above the collector's max_concurrency=2" in (
        verdict.summary
    )
    assert not result.passed
