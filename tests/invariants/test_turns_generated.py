"""``turns_generated`` against hand-built Histories holding the fault layer's record: the turns a
collector hands back are the ones the model generated for the row, none dropped, none invented."""

from __future__ import annotations

from dataclasses import replace

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.corroborated import Corroborated
from pytest_rollout_chaos.invariants.turns_generated import TurnsGenerated
from tests.invariants._builders import observe, rollout, turns
from tests.invariants._records import generated, model_answered, run_generated


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
    run_generated(history, 0, [[7, 8, 2]])  # the first attempt, thrown away (say, NaN logprobs)
    run_generated(history, 0, [turn.generation_token_ids for turn in turns()])
    assert TurnsGenerated().check(observe(1, [rollout(0)], history=history)).status is Status.PASS
    mixed = History()
    run_generated(mixed, 0, [[7, 8, 2]])
    run_generated(mixed, 0, [[99, 2], [12, 2]])  # turns from two different attempts do not add up
    assert TurnsGenerated().check(observe(1, [rollout(0)], history=mixed)).status is Status.FAIL


def test_without_a_server_record_nothing_can_be_corroborated() -> None:
    checker = TurnsGenerated()
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
