"""oom against a real server: a kernel OOM kill through a memory cgroup, with no help from the server.

The fault must say truthfully which happened; the test checks its claim against the kernel's
own log where it can be read, and against the exit status, and checks that the cage is gone.
"""

from __future__ import annotations

import collections.abc
from pathlib import Path

import pytest

from pytest_rollout_chaos.faults import _cgroup, registry
from pytest_rollout_chaos.faults.base import fault_tag
from pytest_rollout_chaos.faults.oom import Oom
from pytest_rollout_chaos.faults.registry import FaultParameterError
from tests.faults._applied import applied
from tests.faults._hooked import Hooked, wait_for
from tests.integration.faults._anyprocess import KernelLog, cage_refused, oom_victims


def _cages(name: str) -> list[Path]:
    """Every directory named ``name`` next to this test's own memory cgroups (and its servers')."""
    mounts = _cgroup.parse_mounts(Path("/proc/self/mountinfo").read_text())
    membership = _cgroup.parse_membership(Path("/proc/self/cgroup").read_text())
    found = []
    for hierarchy, key in (("cgroup2", ""), ("memory", "memory")):
        if hierarchy in mounts and key in membership:
            own = mounts[hierarchy] / membership[key].lstrip("/")
            found += [path for path in (own / name, own.parent / name) if path.exists()]
    return found


@pytest.mark.asyncio
async def test_the_kernel_kills_the_running_server_and_the_cage_goes(own_hooked: Hooked) -> None:
    reason = cage_refused()
    if reason is not None:
        pytest.skip(f"no memory cgroup can be made here: {reason}")
    ctx, history = own_hooked.context()
    process = own_hooked.process
    pid, port = process.pid, process.address()
    fault = Oom(target="hooked")
    kernel_log = KernelLog.open()
    try:
        async with applied(fault, ctx) as facts:
            assert not process.is_running()
            assert not _cages(fault_tag(fault)), "the cage must be removed before inject returns"
        messages = kernel_log.messages() if kernel_log else None
    finally:
        if kernel_log:
            kernel_log.close()
    assert facts["oom"] == "kernel", facts
    assert facts["code"] == 137
    assert facts["limit_bytes"] == 0
    assert isinstance(facts["oom_kills"], int)
    assert facts["oom_kills"] >= 1
    assert isinstance(facts["resident_mib"], float)
    assert facts["resident_mib"] > 1, "the server held memory the cage did not"
    if messages is not None:  # the kernel's own word, where this machine lets us read it
        assert pid in oom_victims(messages), f"no OOM kill of pid {pid} in the kernel log: {messages}"
    exits = wait_for(history, lambda event: event.source == "process" and event.op == "exit")
    assert exits[0].data == {"server": "hooked", "code": 137, "signal": 9}
    assert process.is_running(), "heal restarts the server"
    assert process.address() == port
    assert (await own_hooked.post("/run", {}))[0] == 200


@pytest.mark.asyncio
async def test_where_no_cage_can_be_made_it_sigkills_and_says_why(own_hooked: Hooked) -> None:
    ctx, _ = own_hooked.context()
    fault = Oom(target="hooked", restart_on_heal=False)
    blocker = None
    if cage_refused() is None:  # occupy the cage's name: the kernel refuses to make it again
        blocker = _cgroup.create_cage(own_hooked.process.pid, fault_tag(fault), 1 << 30)
    try:
        async with applied(fault, ctx) as facts:
            pass
        assert blocker is None or blocker.path.exists(), "the fault removed a cgroup it did not make"
    finally:
        if blocker is not None:
            blocker.remove()
    assert facts["oom"] == "sigkill"
    assert facts["code"] == 137
    assert str(facts["reason"]).startswith("no memory cgroup: ")
    if blocker is not None:
        assert "File exists" in str(facts["reason"])
    assert not own_hooked.process.is_running()


def test_parameters_are_the_target_and_restart_on_heal() -> None:
    assert [parameter.name for parameter in registry.parameters("oom")] == ["target", "restart_on_heal"]
    with pytest.raises(FaultParameterError, match="allocate_mb: unknown parameter") as info:
        registry.build("oom", {"target": "policy", "allocate_mb": 512})
    assert info.value.field == "allocate_mb"
    schema = registry.json_schema("oom")
    assert schema["additionalProperties"] is False
    assert isinstance(schema["properties"], collections.abc.Mapping)
    assert set(schema["properties"]) == {"kind", "target", "restart_on_heal"}
