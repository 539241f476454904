"""Pieces of the session-side report objects that need no pytest run: the wire format that carries
records from xdist workers, and the run facts a page names."""

from __future__ import annotations

from pathlib import Path

from pytest_rollout_chaos.invariants.base import Status
from pytest_rollout_chaos.report.html import render_report
from pytest_rollout_chaos.report.record import ScenarioRecord
from pytest_rollout_chaos.report.run_info import RunInfo, ServerLog, log_href
from tests.report._builders import completed, record, result, story_events, verdict


def test_a_record_crosses_the_wire_unchanged() -> None:
    judged = result(
        "loses-a-row",
        rollouts=completed(2),
        verdicts=[verdict("accounted", Status.FAIL, "row 2 has no rollout", ["evidence line"])],
    )
    sent = record(judged, item_outcome="failed", name="loses-a-row", events=story_events(lose_row=2))
    received = ScenarioRecord.from_wire(sent.to_wire())
    assert received == sent
    assert received.result is not None
    assert received.result.row_outcomes == {0: "completed", 1: "completed", 2: "missing"}


def test_a_record_without_a_result_crosses_the_wire() -> None:
    sent = record(None, item_outcome="error", name="no-stack", headline="ServerStartError: boom")
    assert ScenarioRecord.from_wire(sent.to_wire()) == sent


def test_the_toxiproxy_in_use_is_named_per_worker_or_by_its_mode() -> None:
    run = RunInfo(toxiproxy_mode="auto")
    assert run.toxiproxy == "auto (not started)"
    run.add_environment(["gw0: toxiproxy: embedded at http://127.0.0.1:1", "gw0: vllm backend: vllm 0.32"])
    run.add_environment(["gw1: toxiproxy: embedded at http://127.0.0.1:2"])
    assert run.toxiproxy == "gw0: embedded at http://127.0.0.1:1; gw1: embedded at http://127.0.0.1:2"


def test_logs_link_relative_below_the_report_and_by_file_uri_elsewhere(tmp_path: Path) -> None:
    below = ServerLog("policy", str(tmp_path / "logs" / "policy.log"))
    elsewhere = ServerLog("policy", "/var/log/chaos/policy.log")
    assert log_href(below, tmp_path / "report.html") == "logs/policy.log"
    assert log_href(elsewhere, tmp_path / "report.html") == "file:///var/log/chaos/policy.log"


def test_the_page_names_its_run_and_links_each_server_log() -> None:
    run = RunInfo(
        target="my_trainer.chaos:make_collector",
        seed=7,
        backend="vllm",
        model="/models/tiny",
        gym="nemo-gym",
        toxiproxy_mode="docker",
        command="pytest --rollout-chaos -n 2",
        versions={"pytest-rollout-chaos": "0.1.0", "Python": "3.11.7", "vLLM": "0.32.0"},
        environment=[
            "gw0: toxiproxy: docker at http://127.0.0.1:8474",
            "gw0: nemo-gym backend: nemo_gym 0.7.0",
        ],
        logs=[ServerLog("gym_model", "/tmp/logs/gym_model.log", "gw0")],
        workers=["gw1", "gw0"],
    )
    page = render_report([record(result(rollouts=completed(3)), events=story_events())], run=run)
    for text in (
        "<code>my_trainer.chaos:make_collector</code>",
        "<dt>seed</dt><dd>7</dd>",
        "vllm serving <code>/models/tiny</code>",
        "<dt>agents</dt><dd>nemo-gym</dd>",
        "gw0: docker at http://127.0.0.1:8474",
        "pytest-rollout-chaos 0.1.0, Python 3.11.7, vLLM 0.32.0",
        "<code>pytest --rollout-chaos -n 2</code>",
        "<dt>xdist workers</dt><dd>gw0, gw1</dd>",
        "gw0: nemo-gym backend: nemo_gym 0.7.0",
        '<a href="file:///tmp/logs/gym_model.log">gw0: gym_model</a>',
        '<input type="checkbox" id="only-failing"> show only failing scenarios (0)',
    ):
        assert text in page, text
