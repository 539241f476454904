"""The collections after the first (``workload.collections``): run on the same collector with fresh
copies of the rows, recorded in the History, cut at the deadline; judged apart from the first,
whose invariants read the History only up to the cut."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_rollout_chaos.collector.protocol import Mode, Rollout, Row, row_index
from pytest_rollout_chaos.engine import story
from pytest_rollout_chaos.engine.next_steps import outcome_text, run_next_steps
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.engine.verdicts import judge
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import FollowUp, Status
from pytest_rollout_chaos.invariants.registry import STANDING
from pytest_rollout_chaos.scenario import parse_scenario
from pytest_rollout_chaos.scenario.model import Scenario, ScenarioFileError
from tests.invariants._builders import Placed, all_ok, rollout, rows

FAULT = "faults:\n  - {kind: latency, target: agent->model, latency_ms: 1}\n"


def scenario(*, collections: int, invariants: str = "[bounded]", within_s: float = 20.0) -> Scenario:
    text = (
        f"name: s\ndescription: d\nworkload:\n  collections: {collections}\n{FAULT}"
        f"expect:\n  invariants: {invariants}\n  within_s: {within_s}\n"
    )
    return parse_scenario(text, Path("s.chaos.yaml"))


class Steps:
    """A collector that keeps what each call was given, and fails the calls ``plan`` says how:
    ``"raise"``, ``"hang"``, or ``"ok"`` (one completed rollout per row), in turn."""

    def __init__(self, *plan: str) -> None:
        self.plan = list(plan)
        self.given: list[Sequence[Row]] = []
        self.seen: list[Sequence[Row]] = []  # each call's rows as they came, before it edits them

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        self.given.append(rows)
        self.seen.append(copy.deepcopy(rows))
        step = self.plan.pop(0)
        if step == "raise":
            raise RuntimeError("the Gym client was closed after the last step's error")
        if step == "hang":
            await asyncio.Event().wait()
        rows[0]["touched"] = True  # type: ignore[index]  # a collector that edits what it was given
        return [rollout(row_index(row, position)) for position, row in enumerate(rows)]


@pytest.mark.asyncio
async def test_each_next_step_runs_on_the_same_collector_with_a_fresh_copy_and_is_recorded() -> None:
    history, given = History(), rows(3)
    collector = Steps("ok", "ok")
    done = await run_next_steps(
        collector, scenario(collections=3), given, history, who="steps", cancel_grace_s=1.0
    )
    assert [follow_up.number for follow_up in done] == [2, 3]
    assert all(follow_up.rollouts is not None and len(follow_up.rollouts) == 3 for follow_up in done)
    first, second = collector.given
    assert first is not second  # each step its own batch ...
    assert first is not given
    assert collector.seen == [given, given]  # ... as first handed over, whatever the last step did
    assert "touched" not in given[0]
    recorded = [(event.kind, event.data["collection"]) for event in history.events(source="engine")]
    assert recorded == [("invoke", 2), ("ok", 2), ("invoke", 3), ("ok", 3)]
    assert history.events(source="engine", kind="ok")[0].data["outcome"] == (
        "returned 3 rollouts for 3 rows (3 completed)"
    )


@pytest.mark.asyncio
async def test_a_next_step_that_raises_or_hangs_is_kept_as_such_and_recorded() -> None:
    history = History()
    done = await run_next_steps(
        Steps("raise", "hang"),
        scenario(collections=3, within_s=0.2),
        rows(2),
        history,
        who="steps",
        cancel_grace_s=1.0,
    )
    raised, cut = done
    assert isinstance(raised.raised, RuntimeError)
    assert not raised.timed_out
    assert (cut.timed_out, cut.raised, cut.rollouts) == (True, None, None)
    ends = [
        (event.kind, event.data["outcome"])
        for event in history.events(source="engine", op="collection")
        if event.kind != "invoke"
    ]
    assert ends == [
        ("fail", "raised RuntimeError: the Gym client was closed after the last step's error"),
        ("info", "did not finish within 0.2s and was cancelled"),
    ]


def result_with_a_late_request(*, collections: int, cut_at: float | None) -> ScenarioResult:
    """The first collection ran from t=0 to t=1; at t=3 a ``/run`` of row 0 was sent, which is the
    next step's when the History is cut at t=2, and a request sent after the end otherwise."""
    history = Placed()
    history.at(0.1, "collector", "invoke", "run", row=0)
    history.at(2.5, "engine", "invoke", "collection", collection=2)
    history.at(3.0, "collector", "invoke", "run", row=0)
    follow_ups: list[FollowUp] = []
    if collections > 1:
        follow_ups = [FollowUp(2, rows(1), all_ok(1), None, False, 2.5, 1.0, 20.0)]
    return ScenarioResult(
        scenario(collections=collections, invariants="[quiet_after_end]"),
        rows(1),
        history,
        rollouts=[rollout(0)],
        started_at=0.0,
        elapsed_s=1.0,
        follow_ups=follow_ups,
        judged_until=cut_at,
    )


def test_the_first_collection_is_judged_on_the_history_up_to_the_next_step() -> None:
    result = result_with_a_late_request(collections=2, cut_at=2.0)
    judge(result)
    verdicts = {verdict.name: verdict for verdict in result.verdicts}
    assert verdicts["quiet_after_end"].status is Status.PASS, verdicts["quiet_after_end"].render()
    assert verdicts["next_steps_sound"].status is Status.PASS, verdicts["next_steps_sound"].render()
    assert result.passed
    uncut = result_with_a_late_request(collections=2, cut_at=None)
    judge(uncut)  # what the cut keeps out: the next step's request, read as the first's
    assert {v.name: v.status for v in uncut.verdicts}["quiet_after_end"] is Status.FAIL


def test_one_collection_is_judged_as_before_with_no_next_step_verdict() -> None:
    result = result_with_a_late_request(collections=1, cut_at=None)
    judge(result)
    assert [verdict.name for verdict in result.verdicts] == ["quiet_after_end", *STANDING]


def test_the_failure_text_shows_each_next_step_in_the_timeline() -> None:
    history = History()
    history.append("engine", "invoke", "collection", {"collection": 2, "of": 2, "rows": 1})
    history.append("engine", "fail", "collection", {"collection": 2, "outcome": "raised RuntimeError: x"})
    text = history.timeline(filter(story.in_timeline, history.events()))
    assert "engine invoke collection (collection=2, of=2, rows=1)" in text
    assert "engine fail collection (collection=2, outcome='raised RuntimeError: x')" in text


def test_next_steps_sound_cannot_be_listed_without_a_next_step() -> None:
    with pytest.raises(
        ScenarioFileError, match=r"s.chaos.yaml:\d+: expect.invariants: next_steps_sound judges"
    ):
        scenario(collections=1, invariants="[next_steps_sound]")


def test_each_next_steps_outcome_reads_as_one_line() -> None:
    """The line the History, the timeline and the JUnit ``collection:N`` property show."""
    handed = rows(3)
    returned = [rollout(0), rollout(1), None]
    assert [
        outcome_text(FollowUp(2, handed, returned, None, False, 0.0, 0.4, 30.0)),
        outcome_text(FollowUp(3, handed, None, RuntimeError("no permit left"), False, 0.0, 0.1, 30.0)),
        outcome_text(FollowUp(4, handed, None, None, True, 0.0, 30.0, 30.0)),
    ] == [
        "returned 3 rollouts for 3 rows (1 None, 2 completed)",
        "raised RuntimeError: no permit left",
        "did not finish within 30s and was cancelled",
    ]
