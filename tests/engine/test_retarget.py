"""A collector's ``retargets`` move a scenario's faults onto the requests its own loop makes, and
only those faults: kind, trigger and parameters stay the scenario's, and each move is recorded; its
``retriggers`` say which server's requests an ``on_request`` trigger counts where its loop never
asks the trigger's own."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import ClassVar

import pytest

from pytest_rollout_chaos.collector.abilities import (
    Retarget,
    Retrigger,
    declared,
    declared_retargets,
    declared_retriggers,
)
from pytest_rollout_chaos.collector.adapters.skyrl import SkyRLCollector
from pytest_rollout_chaos.collector.adapters.skyrl_retargets import UNMOVED
from pytest_rollout_chaos.engine import retarget
from pytest_rollout_chaos.engine.fit import collector_unfit, unmoved_why, unreachable, why_not
from pytest_rollout_chaos.engine.fit_facts import step_facts
from pytest_rollout_chaos.engine.story import settings_section
from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.scenario.model import FaultStep, Trigger, load_scenario
from tests._unstarted_stack import unstarted_stack
from tests.catalog._verdicts import CATALOG, run_catalog


class _OwnLoop:
    """A collector running trajectories itself: no agent, its environment on the resources server."""

    reaches: ClassVar = {"resources": ("/seed_session",), "collector->policy": None}
    retargets: ClassVar = (
        Retarget(
            "agent",
            "resources",
            "its environment's init",
            kinds=("trajectory_exception",),
            route="/run",
            to_route="/seed_session",
        ),
        Retarget("agent->model", "collector->policy", "its own model calls"),
    )


def test_a_moved_fault_keeps_its_kind_trigger_and_parameters_and_acts_where_the_loop_asks() -> None:
    step = FaultStep("trajectory_exception", "agent", params={"row": 2, "message": "crashed"})
    now, move = retarget.moved(step, declared_retargets(_OwnLoop))
    assert move is not None
    assert move.why == "its environment's init"
    assert (now.kind, now.target, now.at, dict(now.params)) == (
        "trajectory_exception",
        "resources",
        step.at,
        {"row": 2, "message": "crashed", "route": "/seed_session"},
    )
    link = FaultStep("latency", "agent->model", params={"latency_ms": 150})
    assert retarget.moved(link, declared_retargets(_OwnLoop))[0] == FaultStep(
        "latency", "collector->policy", params={"latency_ms": 150}
    )


@pytest.mark.parametrize(
    "step",
    [
        FaultStep("kill", "agent"),  # a kind no retarget names
        FaultStep("trajectory_exception", "agent", params={"route": "/other"}),  # another route
        FaultStep("latency", "agent->resources"),  # a target no retarget names
    ],
)
def test_a_fault_no_retarget_moves_stays_where_the_scenario_aims_it(step: FaultStep) -> None:
    assert retarget.moved(step, declared_retargets(_OwnLoop)) == (step, None)


class _OwnModelCalls:
    """A collector that reads the policy's answers itself: a model answer that does not parse moves."""

    retargets: ClassVar = (
        Retarget(
            "model",
            "policy",
            "its own model calls",
            kinds=("malformed_json",),
            route="/v1/responses",
            to_route="/generate",
            styles=("truncate", "garble"),
        ),
    )


@pytest.mark.parametrize(
    ("params", "moves"),
    [
        ({}, True),  # the fault class's default style: truncate
        ({"style": "garble"}, True),
        ({"style": "emptied"}, False),  # parses, its lists emptied: no counterpart in a generate answer
        ({"style": "no_output"}, False),
    ],
)
def test_a_retarget_with_styles_moves_only_a_fault_of_those_styles(
    params: dict[str, str], moves: bool
) -> None:
    step = FaultStep("malformed_json", "model", params={"route": "/v1/responses", "nth": 3, **params})
    now, move = retarget.moved(step, declared_retargets(_OwnModelCalls))
    assert (move is not None) == moves
    where = ("policy", "/generate") if moves else ("model", "/v1/responses")
    assert (now.target, now.params["route"]) == where
    assert retarget.aimed_style(step) == params.get("style", "truncate")


def test_a_fault_without_a_style_has_none_and_moves_only_where_no_styles_are_named() -> None:
    assert retarget.aimed_style(FaultStep("latency", "agent->model")) is None
    assert Retarget("agent->model", "collector->policy", "why").moves("latency", "agent->model", None, None)
    styled = Retarget("agent->model", "collector->policy", "why", styles=("truncate",))
    assert not styled.moves("latency", "agent->model", None, None)


def test_the_fit_step_judges_a_scenario_where_its_faults_will_act(tmp_path: Path) -> None:
    isolated = load_scenario(CATALOG / "trajectory-exception-isolated.chaos.yaml")
    assert collector_unfit(isolated, declared(_OwnLoop)) is None
    assert why_not(isolated, unstarted_stack(tmp_path), _OwnLoop, run_replicas=1) is None
    frozen = load_scenario(CATALOG / "agent-frozen.chaos.yaml")
    assert retarget.retargeted(frozen, declared_retargets(_OwnLoop)) is frozen
    assert "it acts on 'agent'" in (collector_unfit(frozen, declared(_OwnLoop)) or "")


def test_each_move_is_recorded_with_where_it_was_aimed_and_why() -> None:
    history = History()
    retarget.retarget(
        load_scenario(CATALOG / "collection-cancelled.chaos.yaml"), declared_retargets(_OwnLoop)
    ).record(history)
    [event] = [event for event in history.events() if event.op == retarget.EVENT]
    assert event.data == {
        "step": 0,
        "kind": "latency",
        "from": "agent->model",
        "to": "collector->policy",
        "why": "its own model calls",
    }


def test_a_retarget_declaration_of_the_wrong_shape_or_moving_a_fault_twice_says_what_is_valid() -> None:
    class Wrong:
        retargets: ClassVar = ({"agent": "resources"},)

    with pytest.raises(CollectorTargetError, match=r"a tuple of abilities\.Retarget"):
        declared_retargets(Wrong)

    class Twice:
        retargets: ClassVar = (
            Retarget("agent->model", "model->policy", "one hop"),
            Retarget("model->policy", "collector->policy", "another"),
        )

    with pytest.raises(CollectorTargetError, match="moves faults onto model->policy"):
        declared_retargets(Twice)


def test_skyrls_retargets_move_the_agents_faults_onto_its_loops_requests_and_leave_the_agents_processes() -> (
    None
):
    moved = {
        name: collector_unfit(load_scenario(CATALOG / f"{name}.chaos.yaml"), declared(SkyRLCollector))
        for name in (
            "trajectory-exception-isolated",  # /run -> the environment's /seed_session
            "one-row-hangs",
            "nan-logprobs-nan",  # the /run answer's logprobs -> /inference/v1/generate's
            "policy-nan-logprobs",  # the chat route -> SkyRL's generate route
            "collection-cancelled",  # agent->model -> collector->policy
            "resources-exit-zero",  # agent->resources -> collector->resources
            "truncated-run-response",  # collector->agent -> collector->resources
            "model-malformed-json",  # a model answer cut in half -> a generate answer cut in half
            "resources-down",  # agent->resources -> collector->resources, whose requests skyrl_env records
            "model-link-reset",  # both hops of a model call -> collector->policy, on the policy's 6th request
        )
    }
    assert moved == dict.fromkeys(moved), moved
    for name in (
        "agent-frozen",
        "group-agent-killed",
        "run-answer-emptied",
        "run-answer-cut-off",  # the /run answer's body, which no request of SkyRL's loop gets back
        "short-results",
        "prefix-drift",
    ):
        reason = collector_unfit(load_scenario(CATALOG / f"{name}.chaos.yaml"), declared(SkyRLCollector))
        assert "cannot reach the collector under test" in (reason or ""), name
        assert "; not moved to them: it " in (reason or ""), name  # and why SkyRL has no counterpart


class _OwnModelLink:
    """A collector whose own loop asks the policy where an agent asks the model server, one for one."""

    reaches: ClassVar = {"policy": None, "collector->policy": None}
    retargets: ClassVar = (
        Retarget("agent->model", "collector->policy", "its own model calls", kinds=("reset_peer",)),
        Retarget("model->policy", "collector->policy", "its own model calls, slowed", kinds=("latency",)),
    )
    retriggers: ClassVar[tuple[Retrigger, ...]] = (
        Retrigger("model", "policy", "one policy call for each model call"),
    )


def test_a_retrigger_moves_the_server_an_on_request_trigger_counts_and_keeps_its_nth() -> None:
    link = load_scenario(CATALOG / "model-link-reset.chaos.yaml")
    moved = retarget.retarget(link, declared_retargets(_OwnModelLink), declared_retriggers(_OwnModelLink))
    slowed, reset = moved.scenario.faults
    assert (slowed.target, slowed.at) == ("collector->policy", Trigger())  # ``at: start`` counts nothing
    assert (reset.target, reset.at) == ("collector->policy", Trigger("on_request", server="policy", nth=6))
    assert dict(reset.params) == dict(link.faults[1].params)
    history = History()
    moved.record(history)
    events = [event.data for event in history.events() if event.op == retarget.EVENT]
    assert events[1] == {
        "step": 1,
        "kind": "reset_peer",
        "from": "agent->model on request #6 to model",
        "to": "collector->policy on request #6 to policy",
        "why": "its own model calls; one policy call for each model call",
    }
    assert events[0]["from"] == "model->policy"  # its trigger did not move: not said
    assert (
        "  faults/1 reset_peer: agent->model on request #6 to model -> collector->policy on request #6 "
        in ("\n".join(settings_section(history)))
    )
    alone = retarget.retarget(link, (), declared_retriggers(_OwnModelLink))
    assert [move.index for move in alone.moved] == [1]  # a trigger moves without its fault
    assert alone.scenario.faults[1].target == "agent->model"


def test_a_trigger_on_a_server_the_collector_never_asks_skips_unless_a_retrigger_counts_another() -> None:
    class Unretriggered(_OwnModelLink):
        retriggers: ClassVar = ()

    link = load_scenario(CATALOG / "model-link-reset.chaos.yaml")
    assert collector_unfit(link, declared(_OwnModelLink)) is None
    why = collector_unfit(link, declared(Unretriggered)) or ""
    assert why.startswith("faults/1 reset_peer is triggered on request #6 to model, which the collector "), (
        why
    )
    assert "so it would never fire" in why
    assert collector_unfit(link, declared(SkyRLCollector)) is None
    on_skyrl = retarget.retargeted(link, SkyRLCollector.retargets, SkyRLCollector.retriggers)
    assert [(step.target, step.at) for step in on_skyrl.faults] == [
        ("collector->policy", Trigger()),
        ("collector->policy", Trigger("on_request", server="policy", nth=6, route="/inference/v1/generate")),
    ]


def test_a_retrigger_declaration_of_the_wrong_shape_or_moving_a_trigger_twice_says_what_is_valid() -> None:
    class Wrong:
        retriggers: ClassVar = (Retrigger("model", "model", "nowhere else"),)

    with pytest.raises(CollectorTargetError, match=r"a tuple of abilities\.Retrigger"):
        declared_retriggers(Wrong)

    class Twice:
        retriggers: ClassVar = (
            Retrigger("model", "agent", "one hop"),
            Retrigger("agent", "policy", "another"),
        )

    with pytest.raises(CollectorTargetError, match="moves the triggers on agent twice"):
        declared_retriggers(Twice)


def test_a_reach_naming_a_replica_reaches_that_replica_only() -> None:
    class GivenOne:
        reaches: ClassVar = {"policy": None, "policy[0]": None}

    class GivenAll:
        reaches: ClassVar = {"policy": None}

    given_one = declared(GivenOne)
    assert unreachable(FaultStep("kill", "policy"), given_one) is None
    assert unreachable(FaultStep("kill", "policy[0]"), given_one) is None
    assert unreachable(FaultStep("kill", "policy[1]"), given_one) == (
        "it acts on 'policy[1]', a replica the collector is not given (it requests policy[0] only)"
    )
    assert unreachable(FaultStep("kill", "policy[1]"), declared(GivenAll)) is None  # as ``policy``
    killed = collector_unfit(
        load_scenario(CATALOG / "policy-replica-killed.chaos.yaml"), declared(SkyRLCollector)
    )
    assert "faults/1 kill cannot reach the collector under test: it acts on 'policy[1]', a replica" in (
        killed or ""
    )


def test_a_trigger_counting_a_replicas_requests_fires_for_a_collector_reaching_the_policy() -> None:
    class ReachesThePolicy:
        reaches: ClassVar = {"policy": None, "calculator_agent": None}

    class ReachesTheAgent:
        reaches: ClassVar = {"calculator_agent": None}

    scenario = load_scenario(CATALOG / "baseline.chaos.yaml")
    on_a_replica = Trigger("on_request", server="policy[1]", nth=2)
    scenario = dataclasses.replace(scenario, faults=(FaultStep("kill", "calculator_agent", at=on_a_replica),))
    assert collector_unfit(scenario, declared(ReachesThePolicy)) is None  # ``policy[1]`` as ``policy``
    assert "is triggered on request #2 to policy[1], which the collector under test never requests" in (
        collector_unfit(scenario, declared(ReachesTheAgent)) or ""
    )


def test_an_unmoved_declaration_of_the_wrong_shape_says_what_is_valid() -> None:
    class Wrong:
        unmoved: ClassVar = {"agent": ""}

    with pytest.raises(CollectorTargetError, match="a mapping of fault kind, target or stack setting"):
        declared(Wrong)
    (agent_killed, policy_slowed) = step_facts(
        (FaultStep("kill", "calculator_agent"), FaultStep("latency", "collector->policy"))
    )
    assert unmoved_why(declared(SkyRLCollector), agent_killed) == UNMOVED["agent"]
    assert unmoved_why(declared(SkyRLCollector), policy_slowed) is None


def test_the_story_says_which_faults_moved_where_and_why() -> None:
    history = History()
    isolated = load_scenario(CATALOG / "trajectory-exception-isolated.chaos.yaml")
    retarget.retarget(isolated, declared_retargets(_OwnLoop)).record(history)
    assert settings_section(history) == [
        "faults moved onto the collector's own requests (its retargets and retriggers):",
        "  faults/0 trajectory_exception: agent /run -> resources /seed_session: its environment's init",
        "",
    ]


@pytest.mark.slow
def test_a_moved_fault_is_fired_where_it_was_moved_and_judged_there(tmp_path: Path) -> None:
    """trajectory-exception-isolated with its /run fault moved onto the row's /seed_session: its rule
    is armed and hits there (a rule that hit nothing would fail the scenario), and the row's failure
    is judged as the scenario says."""
    report = tmp_path / "report.json"
    verdicts = run_catalog(
        tmp_path,
        target="tests.engine._retargeting:factory",
        scenarios=["trajectory-exception-isolated"],
        stack_args=[f"--rollout-chaos-json={report}"],
    )["trajectory-exception-isolated"]
    assert verdicts.passed, verdicts.message
    assert verdicts.invariants["isolated_failures"] == "PASS", verdicts.message
    [scenario] = json.loads(report.read_text())["scenarios"]
    [fault] = scenario["result"]["faults"]
    assert (fault["kind"], fault["target"]) == ("trajectory_exception", "resources"), fault
    assert "/seed_session" in fault["fault"], fault
    assert fault["touched"] >= 1, fault
