"""Semantic faults on the policy's own answers, through the fault layer, on this session's backend.

NaN logprobs and prefix drift are put into the policy server's answers in the network path, so
they reach real ``vllm serve`` as they reach the tiny policy (CI runs this module again with
``--rollout-chaos-backend=vllm``). The reference collector's answer to them is visible in the
History (a bounded retry of the row the fault was aimed at, an EOS-boundary repair), and a
collector that passes them on is caught by ``finite_logprobs`` / ``prefix_consistent``. A gateway
answering 504, then 502, while the policy loads is waited out by the reference collector; one that
takes either answer for "ready" collects into the gateway's errors and loses rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rollout_chaos.collector import readiness
from pytest_rollout_chaos.collector.abilities import declared
from pytest_rollout_chaos.collector.target import load_factory
from pytest_rollout_chaos.engine import retarget
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.engine.run import run_once
from pytest_rollout_chaos.engine.verdicts import judge
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.invariants.sends import Span, spans
from pytest_rollout_chaos.scenario.model import load_scenario
from pytest_rollout_chaos.servers.nemo_gym.stack import NemoGymStack
from pytest_rollout_chaos.stack import ChaosStack

CATALOG = Path(__file__).resolve().parents[2] / "scenarios"
GATEWAY = "policy-gateway-not-ready"
HEALTH = "GET /health"
pytestmark = pytest.mark.slow


def _run(stack: ChaosStack, scenario_name: str, target: str) -> ScenarioResult:
    scenario = load_scenario(CATALOG / f"{scenario_name}.chaos.yaml")
    stack.reset()
    if not scenario.stack.policy.splice_prefix:
        stack.gym.set_splice(False)
    factory = load_factory(target)
    moves = declared(factory)
    moved = retarget.retarget(scenario, moves.retargets, moves.retriggers)
    result = run_once(scenario, stack, factory, seed=0, target=target, retargeted=moved)
    judge(result)
    return result


def _verdict(result: ScenarioResult, name: str) -> Status:
    return next(verdict.status for verdict in result.verdicts if verdict.name == name)


def _runs_of_row(result: ScenarioResult, row: int, kind: str) -> list[object]:
    """``/run`` answers for ``row`` as the fault layer recorded them (``ok`` or ``fail``)."""
    return [
        event
        for event in result.history.events(source="agent", kind=kind)
        if event.op == "POST /run" and event.data.get("row") == row
    ]


def _into_policy(result: ScenarioResult) -> list[Span]:
    """Every request the policy was sent, as the fault layer saw it, in the order they began."""
    return [span for span in spans(result.history) if span.link.endswith("->policy")]


def test_nan_logprobs_from_the_policy_are_retried_for_that_row_only(chaos_stack: ChaosStack) -> None:
    result = _run(chaos_stack, "policy-nan-logprobs", "reference")
    history = result.history
    hits = [event.data for event in history.events(source="policy", op="hook")]
    assert hits, "the fault layer never rewrote a policy answer"
    assert {hit["row"] for hit in hits} == {1}, f"the fault hit other rows' requests: {hits}"
    assert all(hit["changed"] > 0 for hit in hits), hits
    retries = [event.data for event in history.events(source="collector", op="retry")]
    assert {retry["row"] for retry in retries} <= {1}
    # Our model server passes the NaN on and the reference retries the row; real NeMo Gym's
    # vllm_model parses the policy's answer with orjson, which rejects NaN, and fails the /run.
    assert retries or _runs_of_row(result, 1, "fail"), "row 1 was neither retried nor failed"
    assert result.passed, result.verdicts
    rollouts = {rollout.row_index: rollout for rollout in result.rollouts or []}
    assert rollouts[1].status == "aborted"
    assert rollouts[1].error, "the aborted row does not say why"


def test_a_collector_that_passes_policy_nans_on_is_caught(chaos_stack: ChaosStack) -> None:
    result = _run(chaos_stack, "policy-nan-logprobs", "fixtures.collectors.nan_silent:factory")
    if not _runs_of_row(result, 1, "ok"):
        pytest.skip(
            "on this stack the model server fails the row instead of passing the NaN on (NeMo Gym's "
            "vllm_model rejects NaN in the policy's answer): no NaN reaches a collector to pass on"
        )
    assert _verdict(result, "finite_logprobs") is Status.FAIL


def test_drift_in_the_policys_tokenize_answers_is_repaired(chaos_stack: ChaosStack) -> None:
    result = _run(chaos_stack, "policy-tokenize-drift", "reference")
    history = result.history
    hits = [event.data for event in history.events(source="policy", op="hook")]
    assert hits, "the fault layer never rewrote a /tokenize answer"
    assert {hit["route"] for hit in hits} == {"/tokenize"}
    assert any(hit["changed"] > 0 for hit in hits), hits
    repaired = history.events(source="collector", op="prefix_repair")
    aborted = [r for r in result.rollouts or [] if r.status == "aborted" and "prefix" in (r.error or "")]
    assert repaired or aborted, "the reference collector neither repaired nor aborted a drifted rollout"
    assert result.passed, result.verdicts


def test_a_collector_that_passes_policy_drift_on_is_caught(chaos_stack: ChaosStack) -> None:
    result = _run(chaos_stack, "policy-tokenize-drift", "fixtures.collectors.prefix_passthrough:factory")
    assert _verdict(result, "prefix_consistent") is Status.FAIL


def test_the_reference_waits_out_a_gateways_504s_then_502s(chaos_stack: ChaosStack) -> None:
    result = _run(chaos_stack, GATEWAY, "reference")
    health = [span.status for span in _into_policy(result) if span.op == HEALTH]
    assert health[:13] == [504] * 6 + [502] * 6 + [200], health
    generations = {span.status for span in _into_policy(result) if span.op != HEALTH}
    assert generations == {200}, "a request for a row reached the gateway before the policy was up"
    assert result.passed, result.verdicts


@pytest.mark.parametrize("status", [502, 504])
def test_a_collector_that_takes_a_gateways_answer_for_ready_is_caught(
    chaos_stack: ChaosStack, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    # the reference collector with one status of the gateway's taken for "ready" (the mutants the
    # mutation benchmark makes of readiness.py); the scenario must fail it
    if isinstance(chaos_stack.gym, NemoGymStack):
        pytest.skip(
            "on real NeMo Gym the model server retries the gateway's 502 and 504 itself (vllm_model "
            "counts them as rate limits): the early rows come through"
        )
    monkeypatch.setattr(readiness, "_NOT_READY", readiness._NOT_READY - {status})
    result = _run(chaos_stack, GATEWAY, "reference")
    assert result.history.events(source="agent", kind="fail"), "no row failed on the gateway's answers"
    generations = [span.status for span in _into_policy(result) if span.op != HEALTH]
    assert status in generations, generations  # it collected into the gateway's answer
    assert not result.passed
    assert result.expectation_failures, result.verdicts
