"""``corroborated`` and ``turns_generated`` against hand-built Histories holding the fault layer's
record: a collector's claims held against what the servers answered, row by row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from pytest_rollout_chaos.collector.protocol import Turn
from pytest_rollout_chaos.history import History, fingerprint
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.corroborated import Corroborated
from pytest_rollout_chaos.invariants.turns_generated import TurnsGenerated
from tests.invariants._builders import observe, rollout, turns

LINK = "collector->agent:calculator_agent"


def run_answered(history: History, row: int, generations: Sequence[Sequence[int]], status: int = 200) -> None:
    """What the layer writes for one ``/run``: the invoke, then ok with fingerprints (or fail)."""
    facts = {"link": LINK, "server": "calculator_agent", "row": row}
    history.append("agent", "invoke", "POST /run", facts)
    if status >= 400:
        history.append("agent", "fail", "POST /run", {**facts, "status": status, "latency_ms": 1.0})
        return
    prints = [fingerprint(ids) for ids in generations]
    history.append("agent", "ok", "POST /run", {**facts, "status": status, "generations": prints})


def model_answered(history: History, row: int | None, generation: Sequence[int]) -> None:
    facts = {"link": "collector->policy", "server": "policy", **({"row": row} if row is not None else {})}
    history.append(
        "policy", "ok", "POST /v1/chat/completions", {**facts, "generations": [fingerprint(generation)]}
    )


def generated(rows: int) -> History:
    """Every row's /run answered with the two turns of ``builders.turns()``."""
    history = History()
    for row in range(rows):
        run_answered(history, row, [turn.generation_token_ids for turn in turns()])
    return history


def test_rollouts_backed_by_their_runs_pass_both() -> None:
    observation = observe(2, [rollout(0), rollout(1)], history=generated(2))
    assert Corroborated().check(observation).status is Status.PASS
    assert TurnsGenerated().check(observation).status is Status.PASS


def test_a_failed_run_reported_completed_names_the_row_the_claim_and_the_status() -> None:
    history = generated(1)
    run_answered(history, 1, [], status=500)
    placeholder = [Turn([0], [0], [0.0])]
    result = Corroborated().check(observe(2, [rollout(0), rollout(1, turns=placeholder)], history=history))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 1: the collector says completed with 1 turn, but the servers saw no successful /run for row 1: "
        "HTTP 500",
    )


def test_a_completed_rollout_without_turns_fails() -> None:
    result = Corroborated().check(observe(1, [rollout(0, turns=[])], history=generated(1)))
    assert result.status is Status.FAIL
    assert (
        "completed with 0 turns; a rollout to train on needs at least one generated turn"
        in result.evidence[0]
    )


def test_a_row_that_was_never_sent_cannot_be_completed() -> None:
    history = generated(1)
    result = Corroborated().check(observe(2, [rollout(0), rollout(1)], history=history))
    assert result.status is Status.FAIL
    assert result.evidence[0].endswith("no successful /run for row 1: no request for that row at all")


def test_dropped_turns_fail_with_what_was_generated() -> None:
    kept = turns()[:1]
    result = TurnsGenerated().check(observe(1, [rollout(0, turns=kept)], history=generated(1)))
    assert result.status is Status.FAIL
    assert result.evidence == (
        "row 0: the collector hands back 1 turn (generated token counts [3]); the agent's /run answered "
        "2 turns (token counts [3, 2]): turns [1] were dropped",
    )


def test_a_turn_the_model_never_produced_fails() -> None:
    first, second = turns()
    invented = replace(second, generation_token_ids=[13, 2])
    result = TurnsGenerated().check(observe(1, [rollout(0, turns=[first, invented])], history=generated(1)))
    assert result.status is Status.FAIL
    assert result.evidence[0].endswith("turns [1] are not among them (the model never produced them)")


def test_a_splice_changes_prompts_not_generations_so_it_passes() -> None:
    first, second = turns(drift=True)
    spliced = replace(second, prompt_token_ids=[*first.prompt_token_ids, *first.generation_token_ids, 11])
    observation = observe(1, [rollout(0, turns=[first, spliced])], history=generated(1))
    assert TurnsGenerated().check(observation).status is Status.PASS


def test_a_retried_row_matches_the_attempt_it_kept() -> None:
    history = History()
    run_answered(history, 0, [[7, 8, 2]])  # the first attempt, thrown away (say, NaN logprobs)
    run_answered(history, 0, [turn.generation_token_ids for turn in turns()])
    assert TurnsGenerated().check(observe(1, [rollout(0)], history=history)).status is Status.PASS
    mixed = History()
    run_answered(mixed, 0, [[7, 8, 2]])
    run_answered(mixed, 0, [[99, 2], [12, 2]])  # turns from two different attempts do not add up
    assert TurnsGenerated().check(observe(1, [rollout(0)], history=mixed)).status is Status.FAIL


def test_aborted_rollouts_are_not_claims() -> None:
    history = History()
    run_answered(history, 0, [], status=500)
    observation = observe(1, [rollout(0, "aborted", error="HTTP 500 from the agent")], history=history)
    assert Corroborated().check(observation).status is Status.NOT_JUDGED
    assert TurnsGenerated().check(observation).status is Status.NOT_JUDGED


@pytest.mark.parametrize("checker", [Corroborated(), TurnsGenerated()], ids=lambda checker: checker.name)
def test_without_a_server_record_nothing_can_be_corroborated(checker: Corroborated | TurnsGenerated) -> None:
    assert checker.check(observe(1, [rollout(0)])).status is Status.NOT_JUDGED
    assert checker.check(observe(1, None, raised=RuntimeError("agent down"))).status is Status.PASS


def test_native_turns_come_from_the_rows_model_calls_or_untied_ones() -> None:
    history = History()
    first, second = turns()
    model_answered(history, 0, first.generation_token_ids)
    model_answered(history, None, second.generation_token_ids)  # a shared prompt left it untied
    observation = observe(1, [rollout(0)], history=history)
    assert Corroborated().check(observation).status is Status.PASS
    assert TurnsGenerated().check(observation).status is Status.PASS
    invented = [first, replace(second, generation_token_ids=[55, 2])]
    result = TurnsGenerated().check(observe(1, [rollout(0, turns=invented)], history=history))
    assert result.status is Status.FAIL
    assert "turns [1] are none of them" in result.evidence[0]
