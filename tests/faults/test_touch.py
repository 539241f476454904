"""What a fault touched, counted from the History's events."""

from __future__ import annotations

from pytest_rollout_chaos.faults.touch import rule_hits
from pytest_rollout_chaos.history import Event


def hook(rule: str, **data: object) -> Event:
    return Event(t=1.0, source="layer", kind="info", op="hook", data={"rule": rule, **data})


def test_a_rewrite_that_changed_nothing_touched_nothing() -> None:
    events = [
        hook("r1", mode="end_of_turn", changed=0),  # no stop id in the prompt: left alone
        hook("r1", mode="end_of_turn", changed=2),
        hook("r1", skipped="response is not JSON", changed=0),
        hook("r1"),  # a hold or an answer in the server's place changes no count: it acted
        hook("r2", changed=1),
    ]
    assert rule_hits(events, "r1") == 2
    assert rule_hits(events, "r2") == 1
    assert rule_hits(events, "r3") == 0
