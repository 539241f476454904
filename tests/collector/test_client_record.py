"""A client's own record of its requests on a link: ``invoke``, then ``ok`` or ``fail`` with what
it raised, which goes on unchanged."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.collector.client_record import recorded
from pytest_rollout_chaos.history import History


def test_each_request_is_recorded_with_its_outcome_and_what_it_raised_goes_on() -> None:
    history = History()
    with recorded(history, "collector->resources", "/seed_session", 3):
        pass
    with (
        pytest.raises(ConnectionRefusedError, match="refused"),
        recorded(history, "collector->resources", "/verify", 3),
    ):
        raise ConnectionRefusedError("refused")
    events = history.events(source="collector", op="request")
    assert [(event.kind, event.data["route"]) for event in events] == [
        ("invoke", "/seed_session"),
        ("ok", "/seed_session"),
        ("invoke", "/verify"),
        ("fail", "/verify"),
    ]
    assert events[3].data == {
        "via": "collector->resources",
        "route": "/verify",
        "row": 3,
        "error": "ConnectionRefusedError: refused",
    }
    assert events[0].request_id == events[1].request_id != events[2].request_id == events[3].request_id


def test_without_a_history_nothing_is_recorded() -> None:
    with pytest.raises(ValueError, match="as it was"), recorded(None, "collector->resources", "/verify", 0):
        raise ValueError("as it was")
