"""``next_steps_sound``: the collections after the first, on a healed stack, each come back whole."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pytest_rollout_chaos.collector.protocol import CollectionError, Rollout
from pytest_rollout_chaos.invariants import registry
from pytest_rollout_chaos.invariants.base import FollowUp, Observation, Status
from pytest_rollout_chaos.invariants.next_steps_sound import NextStepsSound
from tests.invariants._builders import all_ok, observe, rollout, rows

CHECK = NextStepsSound()


def follow_up(
    number: int,
    rollouts: Sequence[Rollout | None] | None,
    *,
    raised: BaseException | None = None,
    timed_out: bool = False,
) -> FollowUp:
    return FollowUp(
        number=number,
        rows=rows(4),
        rollouts=rollouts,
        raised=raised,
        timed_out=timed_out,
        started_at=0.0,
        elapsed_s=1.0,
        deadline_s=20.0,
    )


def after(*follow_ups: FollowUp) -> Observation:
    """A first collection with one row aborted by its fault, then ``follow_ups``."""
    first = [rollout(0), rollout(1), rollout(2), rollout(3, "aborted", error="HTTP 500")]
    return dataclasses.replace(observe(4, first), follow_ups=follow_ups)


def test_next_steps_that_each_return_every_row_healthy_pass() -> None:
    truncated = [*all_ok(3), rollout(3, "truncated")]  # a token limit is a healthy end
    verdict = CHECK.check(after(follow_up(2, all_ok(4)), follow_up(3, truncated)))
    assert verdict.status is Status.PASS, verdict.render()
    assert "collections 2, 3 on the same collector" in verdict.summary


def test_one_scenario_collection_is_not_judged_never_passed() -> None:
    verdict = CHECK.check(after())
    assert verdict.status is Status.NOT_JUDGED
    assert "workload.collections: 1" in verdict.summary


def test_a_next_step_cut_at_the_deadline_fails_naming_it() -> None:
    verdict = CHECK.check(after(follow_up(2, all_ok(4)), follow_up(3, None, timed_out=True)))
    assert verdict.status is Status.FAIL, verdict.render()
    assert "collection(s) 3 of 3" in verdict.summary
    assert verdict.evidence == (
        "collection 3: did not finish within 20s and was cancelled (4 rows requested)",
    )
    assert "1 aborted, 3 completed" in verdict.summary  # the first collection's outcome, for the story


def test_a_next_step_that_raises_fails_with_what_it_raised() -> None:
    message = "collection of 4 rows did not finish within collect_timeout_s=18.0"
    error = CollectionError(message)
    verdict = CHECK.check(after(follow_up(2, None, raised=error)))
    assert verdict.status is Status.FAIL, verdict.render()
    assert verdict.evidence == (f"collection 2: raised CollectionError: {message}",)


def test_rows_of_a_next_step_not_completed_missing_or_doubled_fail_each_named() -> None:
    came_back = [rollout(0), rollout(0), rollout(2, "aborted", error="agent unreachable"), None]
    verdict = CHECK.check(after(follow_up(2, came_back)))
    assert verdict.status is Status.FAIL, verdict.render()
    assert verdict.evidence == (
        "collection 2: 1 entries of the returned list are None",
        "collection 2: no rollout for rows [1, 3]",
        "collection 2: more than one rollout for rows [0]",
        "collection 2: row 2 came back aborted: agent unreachable",
    )


def test_it_stands_only_where_the_scenario_collects_more_than_once() -> None:
    assert "next_steps_sound" not in registry.judged(["bounded"])
    assert registry.judged(["bounded"], next_steps=True) == (
        "bounded",
        *registry.STANDING,
        "next_steps_sound",
    )
    listed = registry.judged(["next_steps_sound"], next_steps=True)
    assert listed.count("next_steps_sound") == 1
