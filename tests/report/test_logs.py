"""Whose log tails a failure shows, and which of their lines: the story's servers, quiet proxies."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status, Verdict
from pytest_rollout_chaos.report.logs import LOG_SECTION_LINES, implicated, sections, tail
from pytest_rollout_chaos.scenario.model import parse_scenario
from pytest_rollout_chaos.settings import LogsMode
from tests.report import _builders

# Scenario names -> process names, as ChaosStack.process_names gives them.
SERVERS = {
    "policy": ("policy",),
    "model": ("gym_model",),
    "resources": ("gym_resources",),
    "head": ("gym_head",),
    "gym_model": ("gym_model",),
    "gym_resources": ("gym_resources",),
    "gym_head": ("gym_head",),
    "calculator_agent": ("calculator_agent",),
    "echo_agent": ("echo_agent",),
    "agent": ("calculator_agent", "echo_agent"),
}
NO_FAULT = """\
name: quiet
description: no fault at all
expect:
  invariants: [accounted]
  witness: {rows_answered: 1}
"""
ROUTINE = "2026-11-28 08:55:14,748 INFO toxiproxy.proxy: proxy collector_to_policy: closed client 127.0.0.1:1"
WARNING = "2026-11-28 08:55:15,001 WARNING toxiproxy.proxy: proxy agent_to_model: upstream refused"


@dataclass
class FakeProcess:
    name: str
    log_path: Path
    running: bool = True

    def is_running(self) -> bool:
        return self.running


def processes(tmp_path: Path, *, down: str = "") -> list[FakeProcess]:
    names = ["policy", "toxiproxy", "fault_layer", "gym_resources", "gym_model"]
    names += ["calculator_agent", "echo_agent", "gym_head"]
    found = []
    for name in names:
        log = tmp_path / f"{name}.log"
        log.write_text(f"--- 08:55:08 start: {name}\nlistening on http://127.0.0.1:1\n")
        found.append(FakeProcess(name, log, running=name != down))
    return found


def quiet_result(
    *, failing_evidence: list[str], passing_evidence: list[str], history: History
) -> ScenarioResult:
    result = ScenarioResult(parse_scenario(NO_FAULT, Path("quiet.chaos.yaml")), [], history, servers=SERVERS)
    result.verdicts = [
        Verdict("accounted", Status.FAIL, "row 3 is lost", tuple(failing_evidence)),
        Verdict("bounded", Status.PASS, "fine", tuple(passing_evidence)),
    ]
    return result


def test_the_failing_verdicts_evidence_and_the_exits_implicate_their_servers(tmp_path: Path) -> None:
    history = History()
    on_resources = history.append("resources", "ok", "POST /verify", {"server": "resources", "row": 3})
    from_an_agent = history.append("agent", "info", "turn", {"row": 3})  # which agent: not said
    on_policy = history.append("policy", "ok", "POST /v1/completions", {"server": "policy"})
    history.append("process", "info", "exit", {"server": "gym_head", "code": 137, "signal": 9})
    result = quiet_result(
        failing_evidence=[on_resources.describe(history.t0), from_an_agent.describe(history.t0)],
        passing_evidence=[on_policy.describe(history.t0)],
        history=history,
    )
    assert implicated(processes(tmp_path), result) == {"gym_resources", "gym_head"}
    assert implicated(processes(tmp_path, down="echo_agent"), result) == {
        "gym_resources",
        "gym_head",
        "echo_agent",
    }


def test_the_fault_schedule_implicates_its_targets_and_what_carries_the_fault(tmp_path: Path) -> None:
    result = _builders.result()  # latency on agent->model: a Toxiproxy toxic on that link
    result.servers = SERVERS
    assert implicated(processes(tmp_path), result) == {
        "calculator_agent",
        "echo_agent",
        "gym_model",
        "toxiproxy",
        "toxiproxy-server",
    }


def test_a_python_test_implicates_the_servers_that_are_down(tmp_path: Path) -> None:
    assert implicated(processes(tmp_path, down="policy"), None) == {"policy"}


def test_the_embedded_toxiproxy_keeps_only_what_is_not_routine(tmp_path: Path) -> None:
    proxy = FakeProcess("toxiproxy", tmp_path / "toxiproxy.log")
    proxy.log_path.write_text(
        "\n".join(["--- start", *[ROUTINE] * 30, WARNING, "Traceback (most recent call last):"])
    )
    assert tail(proxy).splitlines() == ["--- start", WARNING, "Traceback (most recent call last):"]
    assert len(tail(proxy, quiet=False).splitlines()) == LOG_SECTION_LINES
    agent = FakeProcess("calculator_agent", tmp_path / "agent.log")
    agent.log_path.write_text("\n".join([ROUTINE] * 3))
    assert tail(agent).splitlines() == [ROUTINE] * 3  # another server's INFO lines are its own story


def test_the_modes_show_the_story_s_servers_every_server_or_none(tmp_path: Path) -> None:
    running = processes(tmp_path, down="gym_head")

    def titles(mode: LogsMode) -> list[str]:
        return [title for title, _ in sections(mode, running, None, when="call")]

    assert titles("implicated") == ["call gym_head log (last 20 lines)", "call server logs"]
    assert titles("all") == [f"call {process.name} log (last 20 lines)" for process in running]
    assert titles("none") == ["call server logs"]
    [(_, pointer)] = [
        section for section in sections("none", running, None, when="call") if "server logs" in section[0]
    ]
    assert pointer == (
        "not shown (--rollout-chaos-logs=all shows them): policy, toxiproxy, fault_layer, gym_resources, "
        f"gym_model, calculator_agent, echo_agent, gym_head; every server's log is in {tmp_path}"
    )
