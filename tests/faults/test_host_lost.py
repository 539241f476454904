"""host_lost where it cannot act (a plain local process): refused, saying it needs hosts:N; and what
it counts as touched. Its effect on a real host is tested on a hosts:N cluster in ``tests/ray``."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults._ray_fault import not_on_host_reason
from pytest_rollout_chaos.faults.apply import inject_recorded
from pytest_rollout_chaos.faults.base import Exposure, Need
from pytest_rollout_chaos.faults.host_lost import HostLost
from pytest_rollout_chaos.history import Event
from tests.faults._hooked import Hooked

NEEDS_HOSTS = "the server does not run in a Ray actor in this run (pass --rollout-chaos-ray=hosts:N)"


def test_the_scenario_format_knows_it() -> None:
    assert registry.build("host_lost", {"target": "policy[1]"}) == HostLost(target="policy[1]")
    assert HostLost.needs == (Need.HOST,)
    with pytest.raises(registry.FaultParameterError, match=r"unknown parameter for fault 'host_lost'"):
        registry.build("host_lost", {"target": "x", "host": 1})


@pytest.mark.asyncio
async def test_a_local_process_is_refused_and_left_running(hooked: Hooked) -> None:
    ctx, history = hooked.context()
    assert not_on_host_reason(hooked.process) == NEEDS_HOSTS
    with pytest.raises(FaultError, match=r"target 'hooked': the server does not run in a Ray actor"):
        HostLost(target="hooked").preflight(ctx)
    with pytest.raises(FaultError, match=r"target 'hooked': the server does not run in a Ray actor"):
        await inject_recorded(HostLost(target="hooked"), ctx)
    assert hooked.process.is_running()
    assert not history.events(source="process", op="exit")


def request(t: float, kind: str, server: str, rid: str) -> Event:
    op = "request" if kind == "invoke" else "response"
    return Event(t, "policy", kind, op, {"link": f"model->{server}", "server": server}, rid)  # type: ignore[arg-type]


def test_it_touched_the_requests_into_every_server_of_its_host_while_it_was_lost() -> None:
    events = [
        request(1.0, "invoke", "policy[1]", "a"),  # in flight when the host went
        request(2.5, "info", "policy[1]", "a"),
        request(3.0, "invoke", "echo_agent", "b"),  # sent to the other server of the host
        request(0.1, "invoke", "policy[0]", "c"),  # elsewhere
        request(9.0, "invoke", "policy[1]", "d"),  # after the heal
    ]
    exposure = Exposure(2.0, 2.2, 5.0, {"servers": ["echo_agent", "policy[1]"]}, events)
    touched = HostLost(target="policy[1]").touched(exposure)
    assert touched.count == 2
    assert "the servers of its host (echo_agent, policy[1])" in touched.counted
