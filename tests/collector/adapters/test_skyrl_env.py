"""The ``skyrl`` adapter's environment records each request it sends in the collection's History
(the key its deep-copied extras carry), and what a request raised goes on to SkyRL unchanged."""

from __future__ import annotations

import copy
import socket
import urllib.error

import pytest

from pytest_rollout_chaos.collector.adapters import skyrl_env
from pytest_rollout_chaos.history import History


def refusing_url() -> str:
    """A loopback address nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_refused_request_raises_out_of_init_as_it_was_and_is_recorded_as_failed() -> None:
    """A link taken down refuses the environment's connections before the fault layer; its own
    record is what shows them (``faults.touch.client_failures``)."""
    history = History()
    extras = {
        skyrl_env.ROW: {"_rowidx": 5},
        skyrl_env.RESOURCES_URL: refusing_url(),
        skyrl_env.TIMEOUT_S: 5.0,
        skyrl_env.RECORDER: skyrl_env.recorder(history),
        "max_turns": 2,
    }
    environment = skyrl_env.GymRowEnvironment(extras=copy.deepcopy(extras))  # as SkyRL copies them
    with pytest.raises(urllib.error.URLError):
        environment.init([])
    invoke, fail = history.events(source="collector", op="request")
    assert (invoke.kind, fail.kind, invoke.request_id) == ("invoke", "fail", fail.request_id)
    assert {key: fail.data[key] for key in ("via", "route", "row")} == {
        "via": "collector->resources",
        "route": "/seed_session",
        "row": 5,
    }
    assert fail.data["error"].startswith("URLError:")


def test_an_environment_whose_extras_name_no_history_still_raises_as_it_was() -> None:
    extras = {
        skyrl_env.ROW: {"_rowidx": 0},
        skyrl_env.RESOURCES_URL: refusing_url(),
        skyrl_env.TIMEOUT_S: 5.0,
        "max_turns": 2,
    }
    with pytest.raises(urllib.error.URLError):
        skyrl_env.GymRowEnvironment(extras=extras).init([])
