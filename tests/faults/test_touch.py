"""What a fault touched, counted from the History's events."""

from __future__ import annotations

from pytest_rollout_chaos.faults.touch import client_failures, rule_hits
from pytest_rollout_chaos.history import Event, EventKind


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


def request(kind: EventKind, t: float, request_id: str, via: str, **data: object) -> Event:
    """A collector's own record of one request on link ``via`` (``collector.client_record``)."""
    return Event(t, "collector", kind, "request", {"via": via, "row": 0, **data}, request_id)


def test_a_collectors_own_record_of_its_requests_on_the_link_counts_its_failures() -> None:
    """A link taken down refuses connections before the fault layer: only the client's record shows them."""
    link = "collector->resources"
    events = [
        request("invoke", 1.0, "a", link),
        request("fail", 1.1, "a", link, error="URLError: refused"),
        request("invoke", 1.2, "b", link),
        request("ok", 1.3, "b", link),  # answered: not failed by the fault
        request("invoke", 1.2, "c", "collector->policy"),
        request("fail", 1.3, "c", "collector->policy", error="refused"),  # another link
        request("invoke", 5.0, "d", link),
        request("fail", 5.1, "d", link, error="refused"),  # after the heal
    ]
    assert client_failures(events, link, 0.9, 2.0) == 1
    assert client_failures(events, "collector->policy", 0.9, 2.0) == 1
    assert client_failures(events, "agent->resources", 0.9, 2.0) == 0
