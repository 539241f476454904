"""The ``rollout-chaos`` terminal-summary lines on hand-built records."""

from __future__ import annotations

from pathlib import Path

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.report.summary import summary_lines
from tests.report._builders import completed, record, result, verdict


def test_totals_per_invariant_counts_and_one_line_per_scenario() -> None:
    good = result(
        "slow-link",
        rollouts=completed(3),
        verdicts=[verdict("accounted", Status.PASS), verdict("bounded", Status.PASS)],
    )
    bad = result(
        "loses-a-row",
        rollouts=completed(2),
        elapsed_s=1.5,
        verdicts=[verdict("accounted", Status.FAIL), verdict("bounded", Status.UNKNOWN)],
    )
    lines = summary_lines(
        [record(good), record(bad, item_outcome="failed", name="loses-a-row")],
        extra_lines=["toxiproxy: embedded at http://127.0.0.1:1"],
        report_path=Path("out/report.html"),
    )
    assert lines == [
        "scenarios: 2 run, 1 passed, 1 failed",
        "faults injected: 2",
        "invariants: 2 passed, 1 failed, 1 unknown",
        "  accounted  1 passed, 1 failed",
        "  bounded    1 passed, 1 unknown",
        "per scenario:",
        "  PASS   slow-link       0.55s  1 fault",
        "  FAIL   loses-a-row     1.50s  1 fault  accounted FAIL, bounded UNKNOWN",
        "toxiproxy: embedded at http://127.0.0.1:1",
        "report: out/report.html",
    ]


def test_a_scenario_without_a_result_shows_the_last_line_pytest_said() -> None:
    lines = summary_lines(
        [record(None, item_outcome="error", name="no-stack", headline="ServerStartError: boom")]
    )
    assert lines[0] == "scenarios: 1 run, 0 passed, 0 failed, 1 error"
    assert lines[-1] == "  ERROR  no-stack     0.70s  0 faults  ServerStartError: boom"


def test_nothing_run() -> None:
    assert summary_lines([], extra_lines=["toxiproxy: x"]) == ["scenarios: none run", "toxiproxy: x"]


def test_a_harness_fault_error_is_named_before_the_verdicts_it_spoiled() -> None:
    spoiled = result(
        "oom-agent",
        rollouts=completed(3),
        verdicts=[verdict("accounted", Status.PASS)],
    )
    spoiled.fault_errors = [FaultError("injecting oom() on calculator_agent failed: no cgroup\nmore")]
    spoiled.expectation_failures = ["the collector to raise Exception, but it returned 3 rollouts"]
    line = summary_lines([record(spoiled, item_outcome="failed", name="oom-agent")])[-1]
    assert line.endswith("1 fault  fault error: injecting oom() on calculator_agent failed: no cgroup")


def test_not_judged_is_counted_apart_and_a_vacuous_run_says_why() -> None:
    quiet = result(
        "slow-link",
        rollouts=completed(3),
        verdicts=[
            verdict("bounded", Status.PASS),
            verdict("rewards_recorded", Status.NOT_JUDGED, "native style"),
        ],
    )
    vacuous = result(
        "no-drift",
        rollouts=completed(3),
        verdicts=[verdict("prefix_consistent", Status.NOT_JUDGED, "no multi-turn rollout")],
    )
    vacuous.vacuous = ["prefix_consistent: NOT_JUDGED: no multi-turn rollout"]
    lines = summary_lines([record(quiet), record(vacuous, item_outcome="failed", name="no-drift")])
    assert lines[2:6] == [
        "invariants: 1 passed, 0 failed, 0 unknown, 2 not judged",
        "  bounded            1 passed",
        "  prefix_consistent  1 not judged",
        "  rewards_recorded   1 not judged",
    ]
    assert lines[-1] == (
        "  FAIL   no-drift      0.55s  1 fault  vacuous: prefix_consistent: NOT_JUDGED: no multi-turn rollout"
    )


def test_the_settings_given_to_the_trainer_are_listed_once_naming_scenarios_that_differ() -> None:
    from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings

    records = []
    for name, asked in (("plain", {}), ("async", {"nemo_rl.policy.generation.vllm_cfg.async_engine": True})):
        outcome = result(name, rollouts=completed(3))
        taken = TrainerSettings("nemo_rl", asked, ["policy.generation.vllm_cfg.async_engine"])
        taken.default("policy.generation.vllm_cfg.async_engine", False, "grpo.py:992")
        taken.run("logger.num_val_samples_to_print", 0, "print none")
        taken.record(outcome.history, mode="validation")
        records.append(record(outcome, name=name))
    lines = summary_lines(records)
    start = lines.index("settings given to the trainer:")
    assert lines[start + 1 :] == [
        "  nemo_rl validation: policy.generation.vllm_cfg.async_engine = False (upstream default) [plain]",
        "  nemo_rl validation: logger.num_val_samples_to_print = 0 (run)",
        "  nemo_rl validation: policy.generation.vllm_cfg.async_engine = True (scenario) [async]",
    ]
    assert "settings given to the trainer:" not in summary_lines([record(result(), name="reference")])


def test_compact_is_the_totals_and_one_painted_line_per_scenario() -> None:
    good = result("slow-link", rollouts=completed(3), verdicts=[verdict("accounted", Status.PASS)])
    bad = result("loses-a-row", rollouts=completed(2), verdicts=[verdict("accounted", Status.FAIL)])
    lines = summary_lines(
        [record(good), record(bad, item_outcome="failed", name="loses-a-row")],
        extra_lines=["toxiproxy: embedded at http://127.0.0.1:1"],
        report_path=Path("out/report.html"),
        compact=True,
        paint=lambda text, outcome: f"<{outcome}>{text}</{outcome}>",
    )
    assert lines == [
        "scenarios: 2 run, 1 passed, 1 failed",
        "  <passed>PASS </passed>  slow-link       0.55s  1 fault",
        "  <failed>FAIL </failed>  loses-a-row     0.55s  1 fault  accounted FAIL",
        "report: out/report.html",
    ]


def test_a_scenario_drawn_again_says_how_often() -> None:
    redrawn = result("unrepairable-drift", rollouts=completed(4), verdicts=[verdict("bounded", Status.PASS)])
    redrawn.earlier_draws = ["fault touched nothing: line 15: prefix_drift(row=1) on model: 0 requests"]
    assert summary_lines([record(redrawn, name="unrepairable-drift")])[-1] == (
        "  PASS   unrepairable-drift     0.55s  1 fault  drawn 2 times"
    )
