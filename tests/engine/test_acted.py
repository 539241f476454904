"""What each fault touched, counted from a History written by hand, and the lines that say a
step's faults did not act."""

from __future__ import annotations

from pytest_rollout_chaos.engine.acted import count_touches, problems
from pytest_rollout_chaos.engine.schedule import Applied
from pytest_rollout_chaos.faults.down import Down
from pytest_rollout_chaos.faults.freeze import Freeze
from pytest_rollout_chaos.faults.kill import Kill
from pytest_rollout_chaos.faults.latency import Latency
from pytest_rollout_chaos.faults.nan_logprobs import NanLogprobs
from pytest_rollout_chaos.faults.node_down import NodeDown
from pytest_rollout_chaos.faults.restart import Restart
from pytest_rollout_chaos.history import Event, History
from pytest_rollout_chaos.scenario.model import FaultStep, Trigger
from pytest_rollout_chaos.servers.links import link_server


def history_of(*events: Event) -> History:
    history = History(t0=0.0)
    for event in events:
        history._local.append(event)  # events at chosen times, as the servers would have written
    return history


def request(link: str, rid: str, start: float, end: float | None, *, kind: str = "ok") -> list[Event]:
    """One request as the fault layer records it on ``link`` (``end`` None: never finished)."""
    server, source = link_server(link)
    data = {"link": link, "server": server}
    events = [Event(start, source, "invoke", "POST /v1/responses", data, rid)]
    if end is not None:
        events.append(Event(end, source, kind, "POST /v1/responses", data, rid))  # type: ignore[arg-type]
    return events


def applied(
    fault: object,
    step: FaultStep,
    at: float,
    healed: float | None,
    *,
    returned: float | None = None,
    **facts: object,
) -> Applied:
    entry = Applied(step, fault, at, dict(facts), healed_at=healed, returned_at=returned)  # type: ignore[arg-type]
    entry.injected = True
    return entry


def test_a_network_fault_touches_the_requests_that_overlap_its_window() -> None:
    step = FaultStep("latency", "agent->model", line=3)
    fault = Latency("agent->model", latency_ms=100)
    history = history_of(
        *request("agent->model", "before", 0.0, 0.5),  # ended before the inject
        *request("agent->model", "open", 0.5, 1.5),  # in flight when it came
        *request("agent->model", "inside", 1.2, 1.3),
        *request("agent->model", "cut", 1.8, None),  # never finished
        *request("agent->resources", "other link", 1.2, 1.3),
        *request("agent->model", "after", 2.5, 2.6),  # after the heal
    )
    [touch] = count_touches([applied(fault, step, 1.0, 2.0)], history, ended_at=3.0)
    assert touch.count == 3
    assert "requests on agent->model while it was on" in touch.describe()


def test_down_also_counts_what_its_client_failed_meanwhile() -> None:
    step = FaultStep("down", "agent->resources", line=3)
    history = history_of(
        *request(
            "collector->agent:calculator_agent", "run-1", 1.1, 2.5, kind="fail"
        ),  # gave up after the heal
        *request("collector->agent:calculator_agent", "run-2", 1.1, 1.3, kind="ok"),
        *request("agent->model", "model call fails, but model is not the client", 1.1, 1.2, kind="fail"),
    )
    [touch] = count_touches([applied(Down("agent->resources"), step, 1.0, 2.0)], history, ended_at=3.0)
    assert touch.count == 1


def test_a_rule_counts_its_own_hooks_and_a_step_sums_its_instances() -> None:
    step = FaultStep("nan_logprobs", "agent", params={"row": 1}, line=9)
    hook = {"rule": "r-1", "effect": "nan_logprobs"}
    history = history_of(
        Event(1.5, "agent", "info", "hook", hook), Event(1.6, "agent", "info", "hook", {"rule": "r-2"})
    )
    entries = [
        applied(NanLogprobs("calculator_agent", row=1), step, 1.0, 2.0, rule="r-1", match={"row": 1}),
        applied(NanLogprobs("echo_agent", row=1), step, 1.0, 2.0, rule="r-3", match={"row": 1}),
    ]
    touches = count_touches(entries, history, ended_at=3.0)
    assert [touch.count for touch in touches] == [1, 0]
    assert problems(touches, started_at=0.5, ended_at=3.0, t0=0.0) == []  # the row lives on one agent


def test_a_step_that_touched_nothing_or_too_much_is_named_with_its_line_and_match() -> None:
    step = FaultStep("nan_logprobs", "policy", params={"row": 7}, line=12)
    entry = applied(NanLogprobs("policy", row=7), step, 1.0, 2.0, rule="r-1", match={"row": 7})
    [line] = problems(
        count_touches([entry], history_of(), ended_at=3.0), started_at=0.5, ended_at=3.0, t0=0.0
    )
    assert line == (
        "line 12: nan_logprobs(row=7) on policy at start was injected at t=1.00s and touched 0 requests "
        "hit by its rule (expect_hits: at least 1); it matched {'row': 7}; the collection ran from "
        "t=0.50s to t=3.00s"
    )
    nothing_meant = FaultStep("nan_logprobs", "policy", params={"row": 7}, line=12, expect_hits=0)
    entry = applied(NanLogprobs("policy", row=7), nothing_meant, 1.0, 2.0, rule="r-1")
    assert (
        problems(count_touches([entry], history_of(), ended_at=3.0), started_at=0.5, ended_at=3.0, t0=0.0)
        == []
    )


def test_a_fault_injected_after_the_collection_ended_touched_nothing() -> None:
    step = FaultStep("restart", "calculator_agent", at=Trigger("after_s", after_s=0.7), line=8)
    entry = applied(Restart("calculator_agent"), step, 0.71, 0.9, pid_before=1, pid_after=2)
    touches = count_touches([entry], history_of(), ended_at=0.40)
    assert touches[0].count == 0
    [line] = problems(touches, started_at=0.0, ended_at=0.40, t0=0.0)
    assert line == (
        "line 8: restart() on calculator_agent at t=0.7s was injected at t=0.71s, after the end: "
        "the collection ran from t=0.00s to t=0.40s"
    )


RUN_LINK = "collector->agent:calculator_agent"


def test_a_process_fault_touches_the_requests_into_its_server_in_flight_or_sent_while_it_held() -> None:
    step = FaultStep("kill", "calculator_agent", line=8)
    history = history_of(
        *request(RUN_LINK, "done before", 0.1, 0.15),
        *request(RUN_LINK, "in flight, cut", 0.1, 0.25, kind="info"),
        *request(RUN_LINK, "refused while down", 0.3, 0.31, kind="info"),
        *request("collector->agent:echo_agent", "another server", 0.3, 0.35),
        *request(RUN_LINK, "after the heal", 0.6, 0.7),
    )
    [touch] = count_touches([applied(Kill("calculator_agent"), step, 0.2, 0.5)], history, ended_at=0.8)
    assert touch.count == 2
    assert touch.describe() == (
        "kill(restart_on_heal=True) on calculator_agent: 2 requests into its server, in flight or sent "
        "while it was down"
    )


def test_a_process_fault_on_one_policy_replica_counts_only_what_that_replica_received() -> None:
    step = FaultStep("kill", "policy[1]", line=9)
    history = history_of(
        *request("model->policy[0]", "the healthy replica", 0.25, 0.3),
        *request("model->policy[1]", "cut on the killed one", 0.1, 0.25, kind="info"),
        *request("model->policy[1]", "refused by the killed one", 0.3, 0.31, kind="info"),
        *request("model->policy[0]", "the healthy one again", 0.35, 0.4),
    )
    [touch] = count_touches([applied(Kill("policy[1]"), step, 0.2, 0.5)], history, ended_at=0.8)
    assert touch.count == 2


def test_a_process_fault_on_a_server_the_collection_never_used_touched_nothing() -> None:
    # The process existed and was killed, but no request of the collection went to it.
    step = FaultStep("kill", "echo_agent", line=8)
    history = history_of(*request(RUN_LINK, "the workload's own agent", 0.1, 0.3))
    entry = applied(Kill("echo_agent"), step, 0.2, 0.5, pid=4242)
    [line] = problems(count_touches([entry], history, ended_at=0.4), started_at=0.0, ended_at=0.4, t0=0.0)
    assert line == (
        "line 8: kill() on echo_agent at start was injected at t=0.20s and touched 0 requests into its "
        "server, in flight or sent while it was down (expect_hits: at least 1); the collection ran from "
        "t=0.00s to t=0.40s"
    )


def test_a_kill_at_start_acts_on_the_requests_the_collection_then_sends_and_fails() -> None:
    step = FaultStep("freeze", "agent", line=5)  # one fault per agent instance, judged together
    history = history_of(*request(RUN_LINK, "held by the frozen agent", 0.05, None))
    entries = [
        applied(Freeze("calculator_agent"), step, 0.01, 0.9),
        applied(Freeze("echo_agent"), step, 0.01, 0.9),
    ]
    touches = count_touches(entries, history, ended_at=0.8)
    assert [touch.count for touch in touches] == [1, 0]
    assert problems(touches, started_at=0.0, ended_at=0.8, t0=0.0) == []


def test_a_restart_touches_only_what_it_cut_or_refused_before_it_was_back() -> None:
    step = FaultStep("restart", "calculator_agent", line=8)
    history = history_of(
        *request(RUN_LINK, "cut", 0.1, 0.25, kind="info"),
        *request(RUN_LINK, "served by the new process", 0.4, 0.5),
    )
    entry = applied(Restart("calculator_agent"), step, 0.2, 0.9, returned=0.3)
    [touch] = count_touches([entry], history, ended_at=0.8)
    assert touch.count == 1
    later = applied(Restart("calculator_agent"), step, 0.35, 0.9, returned=0.38)
    assert count_touches([later], history, ended_at=0.8)[0].count == 0


def test_node_down_touches_the_requests_into_every_server_of_its_node() -> None:
    step = FaultStep("node_down", "calculator_agent", line=8)
    history = history_of(*request("collector->agent:echo_agent", "on the same node", 0.1, 0.3, kind="info"))
    entry = applied(NodeDown("calculator_agent"), step, 0.2, 0.9, servers=["calculator_agent", "echo_agent"])
    [touch] = count_touches([entry], history, ended_at=0.8)
    assert touch.count == 1
    assert "requests into the servers of its node (calculator_agent, echo_agent)" in touch.describe()
