"""The signs NeMo Gym's own client leaves on the stack, which the harness's ``GymClient`` never does.

NeMo Gym's ``ServerClient`` asks the head server for the global config with ``requests`` before it
sends a row; the harness's client is given the agents' addresses and records every ``/run`` it
sends itself. Shared by the tests of the adapters that run NeMo Gym's client (``nemo_rl``, ``verl``).
"""

from __future__ import annotations

from pytest_rollout_chaos.collector.gym_client import GymClient
from pytest_rollout_chaos.trial import Trial


def config_asked(trial: Trial) -> list[str]:
    """The User-Agent of each request for the global config the head server recorded."""
    return [
        str(event.data.get("user_agent"))
        for event in trial.history.events(source="head", op="global_config_dict_yaml")
    ]


def assert_nemo_gyms_client_ran(trial: Trial, rows: int) -> None:
    """The head asked by ``requests``, no ``/run`` of the harness's client, and each of ``rows``
    rows' ``/run`` through the collector's links, as the fault layer recorded."""
    asked = config_asked(trial)
    assert asked, trial.history.timeline()
    assert all(agent.startswith("python-requests/") for agent in asked), asked
    assert trial.history.events(source="collector", op="run") == []
    runs = [event for event in trial.history.events(kind="invoke") if event.op == "POST /run"]
    assert len(runs) == rows


def arm_short_results(trial: Trial, count: int) -> None:
    """Arm the ``short_results`` fault on the collection's Gym client, as the fault's inject does."""
    armed = trial.faults.gym_client
    assert isinstance(armed, GymClient)
    assert armed is trial.collector.gym
    armed.short_results(count)


def assert_short_results_acted(trial: Trial, rows: int, count: int) -> None:
    """The fault cut NeMo Gym's own client's results by ``count`` of ``rows``, and that client ran."""
    shortened = trial.history.events(source="collector", op="short_results")
    assert [event.data for event in shortened] == [{"rows": rows, "yielded": rows - count}]
    assert config_asked(trial), "NeMo Gym's own client did not run"
