"""The JSON results document built from records: it validates against its shipped schema, names
each scenario's verdicts, faults and timings, and the fault facts cross the xdist wire."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from pytest_rollout_chaos.engine.acted import Touches
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.engine.schedule import Applied
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.invariants.base import FollowUp, Status
from pytest_rollout_chaos.report.json_report import json_schema, render_json, write_json
from pytest_rollout_chaos.report.record import FaultFacts, ScenarioRecord
from pytest_rollout_chaos.report.run_info import RunInfo, ServerLog, run_facts
from pytest_rollout_chaos.settings import ChaosSettings
from tests.report._builders import T0, completed, record, result, story_events, verdict

FAULT_TEXT = "latency(stream='downstream', toxicity=1.0, latency_ms=200, jitter_ms=0) on agent->model"
EVIDENCE = "t=0.55s collect returned 2"
SETUP_ONLY = {"setup_s": 2.0}
VALIDATOR = jsonschema.Draft202012Validator(json_schema(), format_checker=jsonschema.FormatChecker())


def _touched(outcome: ScenarioResult, count: int) -> ScenarioResult:
    """``outcome`` with its one latency step injected at t=0.05s, healed at t=1.05s, touching ``count``."""
    step = outcome.scenario.faults[0]
    fault = registry.build(step.kind, {"target": step.target, **step.params})
    applied = Applied(step, fault, T0 + 0.05, injected=True, healed_at=T0 + 1.05, healed=True)
    outcome.touches = [Touches(applied, count, f"requests on {step.target} while it was on")]
    return outcome


def _records() -> list[ScenarioRecord]:
    passing = _touched(result("all-complete", rollouts=completed(3)), 3)
    passing.verdicts = [verdict("accounted", Status.PASS), verdict("bounded", Status.PASS)]
    failing = _touched(
        result(
            "loses-a-row",
            rollouts=completed(2),
            verdicts=[verdict("accounted", Status.FAIL, "row 2 has no rollout", [EVIDENCE])],
        ),
        2,
    )
    return [
        record(passing, name="all-complete", extra={"setup_s": 1.5, "call_s": 0.7}),
        record(
            failing,
            item_outcome="failed",
            name="loses-a-row",
            events=story_events(lose_row=2),
            message="outcome: ...",
            headline="InvariantViolation: accounted",
            extra={"setup_s": 0.01, "call_s": 0.7},
        ),
        record(
            None, item_outcome="error", name="no-stack", headline="ServerStartError: boom", extra=SETUP_ONLY
        ),
    ]


def _run() -> RunInfo:
    return RunInfo(
        target="reference",
        seed=3,
        command="pytest --rollout-chaos",
        started="2026-01-01 00:00:00 UTC",
        versions={"pytest-rollout-chaos": "0.1.0", "Python": "3.11.7"},
        environment=["toxiproxy: embedded at http://127.0.0.1:1"],
        logs=[ServerLog("policy", "/tmp/logs/policy.log")],
    )


def test_the_document_validates_and_tells_each_scenario() -> None:
    document = render_json(_records(), run=_run())
    VALIDATOR.validate(document)
    assert document["format_version"] == 1
    assert document["run"]["settings"]["seed"] == 3
    assert document["run"]["toxiproxy"] == "embedded at http://127.0.0.1:1"
    assert document["run"]["logs"] == [{"name": "policy", "path": "/tmp/logs/policy.log", "worker": ""}]
    assert document["totals"] == {
        "scenarios": 3,
        "passed": 1,
        "failed": 1,
        "error": 1,
        "skipped": 0,
        "faults_injected": 2,
        "verdicts": {"PASS": 2, "FAIL": 1, "UNKNOWN": 0, "NOT_JUDGED": 0},
    }
    passing, failing, errored = document["scenarios"]
    assert passing["timings"] == {"setup_s": 1.5, "call_s": 0.7, "elapsed_s": 0.55, "within_s": 30.0}
    assert passing["file"] == {"path": "all-complete.chaos.yaml", "line": 1}
    assert passing["fault_steps"] == ["latency(latency_ms=200) on agent->model at start for 1s"]
    assert failing["result"]["verdicts"] == [
        {
            "name": "accounted",
            "status": "FAIL",
            "summary": "row 2 has no rollout",
            "evidence": ["t=0.55s collect returned 2"],
        }
    ]
    assert failing["result"]["row_outcomes"] == {"completed": 2, "missing": 1}
    (fault,) = failing["result"]["faults"]
    assert fault == {
        "kind": "latency",
        "target": "agent->model",
        "line": 8,
        "fault": FAULT_TEXT,
        "injected_at_s": pytest.approx(0.05),
        "healed_at_s": pytest.approx(1.05),
        "touched": 2,
        "counted": "requests on agent->model while it was on",
    }
    assert errored["result"] is None
    assert errored["timings"] == {"setup_s": 2.0, "call_s": None, "elapsed_s": None, "within_s": 30.0}
    assert errored["headline"] == "ServerStartError: boom"


def test_the_run_says_what_plays_nemo_gyms_client_for_its_target() -> None:
    own = run_facts(ChaosSettings(target="nemo_gym"), command=["pytest"])
    stand_in = run_facts(ChaosSettings(), command=["pytest"])
    document = render_json([], run=own)
    VALIDATOR.validate(document)
    assert document["run"]["gym_client"].startswith("NeMo Gym's own: nemo_gym.rollout_collection")
    assert stand_in.gym_client.startswith("stand-in: the harness's GymClient")


def test_the_schema_refuses_what_the_document_never_holds() -> None:
    document = render_json(_records(), run=_run())
    document["scenarios"][0]["outcome"] = "xpassed"
    document["scenarios"][1]["result"]["faults"][0]["touched"] = -1
    del document["totals"]["verdicts"]
    errors = sorted(error.json_path for error in VALIDATOR.iter_errors(document))
    assert errors == ["$.scenarios[0].outcome", "$.scenarios[1].result.faults[0].touched", "$.totals"]


def test_fault_facts_and_timings_cross_the_wire() -> None:
    sent = _records()[1]
    received = ScenarioRecord.from_wire(sent.to_wire())
    assert received == sent
    assert received.result is not None
    assert received.result.faults[0] == FaultFacts(
        kind="latency",
        target="agent->model",
        line=8,
        fault=FAULT_TEXT,
        injected_at_s=pytest.approx(0.05),  # type: ignore[arg-type]
        healed_at_s=pytest.approx(1.05),  # type: ignore[arg-type]
        touched=2,
        counted="requests on agent->model while it was on",
    )
    assert (received.setup_s, received.call_s) == (0.01, 0.7)


def test_write_json_makes_its_folder(tmp_path: Path) -> None:
    path = write_json(tmp_path / "out" / "results.json", _records(), run=_run())
    VALIDATOR.validate(json.loads(path.read_text(encoding="utf-8")))


def test_the_settings_an_adapter_gave_its_trainer_are_in_the_result_and_cross_the_wire() -> None:
    from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings

    outcome = result("adapter-run", rollouts=completed(3))
    taken = TrainerSettings("nemo_rl", {"nemo_rl.grpo.max_rollout_turns": 2}, ["grpo.max_rollout_turns"])
    taken.default(
        "env.nemo_gym.initial_global_config_dict.rollout_max_attempts_to_avoid_lp_nan", 1, "nemo_gym.py:86"
    )
    taken.run("grpo.max_rollout_turns", 4, "the harness's")
    taken.record(outcome.history, mode="validation", variant="sync")
    sent = record(outcome, name="adapter-run")
    document = render_json([sent], run=_run())
    VALIDATOR.validate(document)
    [entry] = document["scenarios"][0]["result"]["trainer_settings"]
    assert entry == {
        "trainer": "nemo_rl",
        "mode": "validation",
        "variant": "sync",
        "settings": [
            {
                "key": "env.nemo_gym.initial_global_config_dict.rollout_max_attempts_to_avoid_lp_nan",
                "value": 1,
                "source": "upstream default",
                "where": "nemo_gym.py:86",
            },
            {"key": "grpo.max_rollout_turns", "value": 2, "source": "scenario", "where": "the harness's"},
        ],
    }
    assert ScenarioRecord.from_wire(sent.to_wire()) == sent
    entry["settings"][0]["source"] = "the adapter's whim"
    assert [error.json_path for error in VALIDATOR.iter_errors(document)] == [
        "$.scenarios[0].result.trainer_settings[0].settings[0].source"
    ]


def test_what_an_adapter_ran_upstream_is_in_the_result_and_crosses_the_wire() -> None:
    from pytest_rollout_chaos.collector.adapters import slime

    outcome = result("adapter-run", rollouts=completed(3))
    history = outcome.history
    history.append("collector", "info", "gym_client", {"client": "stand-in over ctx.gym"})
    with slime.upstream_call(history, {"call": "generate_and_rm_group"}, ["the hook", "the loop"]):
        pass
    with slime.upstream_call(
        history, {"call": "RolloutManager.generate"}, ["the hook"], read_out="train data"
    ):
        pass
    sent = record(outcome, name="adapter-run")
    document = render_json([sent], run=_run())
    VALIDATOR.validate(document)
    assert document["scenarios"][0]["result"]["upstream_run"] == {
        "read_out": "train data",
        "calls": [
            {
                "call": "generate_and_rm_group",
                "outcome": "ok",
                "stood_in": ["the hook", "the loop"],
                "read_out": "",
                "error": "",
            },
            {
                "call": "RolloutManager.generate",
                "outcome": "ok",
                "stood_in": ["the hook"],
                "read_out": "train data",
                "error": "",
            },
        ],
        "stood_in": ["the hook", "the loop"],
        "gym_clients": ["stand-in over ctx.gym"],
    }
    assert ScenarioRecord.from_wire(sent.to_wire()) == sent
    document["scenarios"][0]["result"]["upstream_run"]["calls"][0]["outcome"] = "fine"
    assert [error.json_path for error in VALIDATOR.iter_errors(document)] == [
        "$.scenarios[0].result.upstream_run.calls[0].outcome"
    ]


def test_a_collector_that_is_no_adapter_has_an_empty_upstream_run() -> None:
    outcome = result("reference-run", rollouts=completed(3))
    outcome.history.append("collector", "invoke", "collect", {"rows": 3, "style": "gym"})
    document = render_json([record(outcome, name="reference-run")], run=_run())
    VALIDATOR.validate(document)
    assert document["scenarios"][0]["result"]["upstream_run"] == {}


def test_the_collections_after_the_first_are_in_the_result_and_cross_the_wire() -> None:
    outcome = result("two-steps", rollouts=completed(3))
    rows = outcome.rows
    outcome.follow_ups = [
        FollowUp(2, rows, completed(3), None, False, T0 + 2.0, 0.41, 30.0),
        FollowUp(3, rows, None, RuntimeError("no permit left"), False, T0 + 3.0, 0.02, 30.0),
        FollowUp(4, rows, None, None, True, T0 + 4.0, 30.0, 30.0),
    ]
    sent = record(outcome, name="two-steps")
    document = render_json([sent], run=_run())
    VALIDATOR.validate(document)
    follow_ups = document["scenarios"][0]["result"]["follow_ups"]
    assert [(f["number"], f["ended"], f["raised"], f["statuses"]) for f in follow_ups] == [
        (2, "returned", None, {"completed": 3}),
        (3, "raised", "RuntimeError: no permit left", {}),
        (4, "cut", None, {}),
    ]
    assert follow_ups[0]["rows"] == len(rows)
    assert ScenarioRecord.from_wire(sent.to_wire()) == sent
    once = render_json([record(result("one-step", rollouts=completed(3)), name="one-step")], run=_run())
    assert once["scenarios"][0]["result"]["follow_ups"] == []
    follow_ups[1]["ended"] = "crashed"
    assert [error.json_path for error in VALIDATOR.iter_errors(document)] == [
        "$.scenarios[0].result.follow_ups[1].ended"
    ]
