"""Timeline data from hand-built Histories: lanes per row, attempts, marks, fault bands, exit markers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.report.timeline import Outcome, Timeline, build_timeline, row_outcomes
from tests.report._builders import T0, event, rows, story_events


def _timeline(
    events: Sequence[Event], *, outcomes: Mapping[int, Outcome] | None = None, elapsed_s: float = 0.55
) -> Timeline:
    return build_timeline(
        events,
        t0=T0,
        rows=rows(3),
        outcomes=outcomes or dict.fromkeys(range(3), "completed"),
        elapsed_s=elapsed_s,
        deadline_s=30.0,
    )


def test_one_lane_per_requested_row_with_its_attempt() -> None:
    timeline = _timeline(story_events())
    assert [lane.label for lane in timeline.lanes] == [
        "row 0 · calculator",
        "row 1 · calculator",
        "row 2 · calculator",
    ]
    first = timeline.lanes[0].spans
    assert len(first) == 1
    assert (round(first[0].start_s, 3), round(first[0].end_s, 3), first[0].status) == (0.02, 0.3, "ok")
    assert [mark.kind for mark in timeline.lanes[0].marks] == ["request"]


def test_an_attempt_without_an_end_is_open_until_the_collection_ended() -> None:
    timeline = _timeline(story_events(lose_row=1), elapsed_s=0.5)  # the collector's own end: 0.55s
    (span,) = timeline.lanes[1].spans
    assert span.status == "open"
    assert round(span.end_s, 3) == 0.55


def test_failed_attempts_and_retries_are_drawn_on_their_row() -> None:
    events = [
        event(0.0, "collector", "invoke", "run", row=0),
        event(0.1, "collector", "fail", "run", row=0, error="HTTP 500"),
        event(0.11, "collector", "info", "retry", row=0, attempt=1, reason="non-finite logprob nan"),
        event(0.12, "collector", "invoke", "run", row=0),
        event(0.2, "collector", "ok", "run", row=0),
        event(0.15, "policy", "fail", "POST /v1/chat/completions", row=0, status=503),
    ]
    lane = _timeline(sorted(events, key=lambda e: e.t)).lanes[0]
    assert [(span.status, span.detail) for span in lane.spans] == [("fail", "HTTP 500"), ("ok", "")]
    assert [mark.kind for mark in lane.marks] == ["retry", "request-fail"]
    assert "non-finite logprob nan" in lane.marks[0].label


def test_a_fault_band_runs_from_when_inject_began_to_heal() -> None:
    (band,) = _timeline(story_events()).bands
    assert (round(band.start_s, 3), round(band.end_s, 3)) == (0.04, 1.05)  # inject took 10ms
    assert band.label == "latency on agent->model (latency_ms=200)"
    assert (band.family, band.healed, band.failed) == ("network", True, False)


def test_a_fault_never_healed_lasts_to_the_end_and_a_failed_inject_says_so() -> None:
    events = [
        event(0.1, "fault", "info", "inject", fault="kill", target="agent", error="FaultError: not running"),
        event(0.2, "fault", "info", "inject", fault="nan_logprobs", target="policy", shape="nan"),
        event(2.0, "collector", "ok", "collect"),
    ]
    kill, nan = _timeline(events).bands
    assert kill.failed
    assert kill.label == "kill on agent (inject failed: FaultError: not running)"
    assert (nan.healed, round(nan.end_s, 3), nan.family) == (False, 2.0, "semantic")
    assert nan.label == "nan_logprobs on policy (shape=nan)"


def test_process_exits_and_restarts_are_markers() -> None:
    events = [
        event(0.3, "process", "info", "exit", server="calculator_agent", code=137, signal=9),
        event(0.4, "process", "info", "exit", server="resources", code=0, signal=None),
        event(0.9, "fault", "info", "restart", server="calculator_agent"),
    ]
    labels = [(marker.kind, marker.label) for marker in _timeline(events).markers]
    assert labels == [
        ("exit", "calculator_agent signal 9"),
        ("exit", "resources exit 0"),
        ("restart", "calculator_agent restarted"),
    ]


def test_each_collection_after_the_first_starts_a_marker() -> None:
    events = [
        event(1.0, "engine", "invoke", "collection", collection=2, of=3, rows=3),
        event(2.0, "engine", "ok", "collection", collection=2, outcome="returned 3 rollouts"),
        event(2.1, "engine", "invoke", "collection", collection=3, of=3, rows=3),
    ]
    labels = [(marker.kind, marker.label) for marker in _timeline(events).markers]
    assert labels == [("step", "collection 2"), ("step", "collection 3")]


def test_the_collection_extent_comes_from_the_collectors_own_events() -> None:
    timeline = _timeline(story_events(), elapsed_s=0.5)
    assert (round(timeline.collection_start_s, 3), round(timeline.collection_end_s, 3)) == (0.01, 0.55)
    assert timeline.collect_status == "ok"
    assert round(timeline.end_s, 3) == 1.05  # the heal after the collection is still in the picture


def test_row_outcomes_name_each_rows_fate() -> None:
    returned = [Rollout(0, "completed"), Rollout(2, "aborted", error="HTTP 500")]
    assert row_outcomes(rows(3), returned, raised=False, timed_out=False) == {
        0: "completed",
        1: "missing",
        2: "aborted",
    }
    assert set(row_outcomes(rows(2), None, raised=True, timed_out=False).values()) == {"raised"}
    assert set(row_outcomes(rows(2), None, raised=False, timed_out=True).values()) == {"timed out"}


def test_fault_effects_that_changed_something_are_drawn_where_they_bit() -> None:
    events = [
        event(
            0.1,
            "policy",
            "info",
            "hook",
            effect="nan_logprobs",
            rule="r1",
            row=None,
            route="/v1/x",
            changed=16,
        ),
        event(
            0.2,
            "policy",
            "info",
            "hook",
            effect="nan_logprobs",
            rule="r1",
            row=None,
            route="/tokenize",
            changed=0,
        ),
        event(0.3, "agent", "info", "hook", effect="http_error", rule="r2", row=1, route="/run", status=500),
    ]
    timeline = _timeline(events)
    assert [(round(mark.t_s, 3), mark.label) for mark in timeline.effects] == [
        (0.1, "policy: nan_logprobs (route=/v1/x, changed=16)"),
        (0.3, "agent: http_error (row=1, route=/run, status=500)"),
    ]
    assert [mark.kind for mark in timeline.lanes[1].marks] == ["effect"]
