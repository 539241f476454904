"""partition where it cannot act (a plain local process): refused, saying it needs hosts:N; and what
it counts as touched. The cut itself is tested on real namespaces in ``tests/ray/test_netns.py``, and
on a hosts:N cluster in ``tests/ray``."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.apply import inject_recorded
from pytest_rollout_chaos.faults.base import Exposure
from pytest_rollout_chaos.faults.partition import Partition
from pytest_rollout_chaos.history import Event
from tests.faults._hooked import Hooked


def test_the_scenario_format_knows_it_with_or_without_a_peer() -> None:
    assert registry.build("partition", {"target": "calculator_agent", "peer": "policy"}) == Partition(
        target="calculator_agent", peer="policy"
    )
    assert registry.build("partition", {"target": "policy"}) == Partition(target="policy", peer="")
    schema = registry.json_schema("partition")
    assert schema["properties"]["peer"]["type"] == "string"
    with pytest.raises(registry.FaultParameterError, match=r"peer: expected a string"):
        registry.build("partition", {"target": "policy", "peer": 3})


@pytest.mark.asyncio
async def test_a_local_process_is_refused_and_nothing_is_cut(hooked: Hooked) -> None:
    ctx, _ = hooked.context()
    fault = Partition(target="hooked", peer="hooked")
    with pytest.raises(FaultError, match=r"target 'hooked': the server does not run in a Ray actor"):
        fault.preflight(ctx)
    with pytest.raises(FaultError, match=r"target 'hooked': the server does not run in a Ray actor"):
        await inject_recorded(fault, ctx)
    await fault.heal(ctx)  # nothing to undo
    assert hooked.process.is_running()


def event(t: float, kind: str, link: str, rid: str) -> Event:
    server = link.rpartition("->")[2].partition(":")[2] or link.rpartition("->")[2]
    return Event(t, "agent", kind, "request", {"link": link, "server": server}, rid)  # type: ignore[arg-type]


def test_it_touched_the_requests_across_the_cut_and_into_the_servers_cut_off() -> None:
    events = [
        event(1.0, "invoke", "agent->model", "a"),  # across the cut, in flight when it came
        event(3.0, "invoke", "collector->agent:calculator_agent", "b"),  # into a server cut off
        event(3.0, "invoke", "collector->agent:echo_agent", "c"),  # a server on neither side
        event(3.0, "invoke", "model->policy", "d"),  # on one side only
        event(0.1, "invoke", "agent->model", "e"),
        event(0.5, "ok", "agent->model", "e"),  # over before the cut
    ]
    facts = {"links": ["agent->model"], "cut_off": ["calculator_agent"]}
    touched = Partition(target="calculator_agent", peer="policy").touched(
        Exposure(2.0, 2.1, 6.0, facts, events)
    )
    assert touched.count == 2
    assert touched.counted.startswith("requests on the links across the cut")
