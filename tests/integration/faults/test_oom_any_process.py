"""oom against servers that know nothing of it: a stdlib server, the tiny torch policy, a process group.

Where this machine lets us make a memory cgroup the kill must be the kernel's, confirmed by
the fault's own counter and, where readable, the kernel log; elsewhere these tests skip (the
fallback is covered in ``tests/faults/test_oom.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import psutil
import pytest

from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.faults.oom import Oom
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.policy.spec import tiny_policy_spec
from pytest_rollout_chaos.servers.process import ManagedProcess
from tests.faults._applied import applied
from tests.integration.faults._anyprocess import (
    KernelLog,
    cage_refused,
    get_json,
    oom_victims,
    plain_server,
)

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _cages_permitted() -> None:
    reason = cage_refused()
    if reason is not None:
        pytest.skip(f"no memory cgroup can be made here: {reason}")


@pytest.fixture
def kernel_log() -> Iterator[KernelLog | None]:
    log = KernelLog.open()
    try:
        yield log
    finally:
        if log is not None:
            log.close()


def _assert_kernel_kill(facts: Mapping[str, object], pid: int, log: KernelLog | None) -> list[int] | None:
    """Check the fault's claim; return the kernel's OOM victims in order, where its log is readable."""
    __tracebackhide__ = True
    assert facts["oom"] == "kernel", facts
    assert (facts["pid"], facts["code"]) == (pid, 137), facts
    assert isinstance(facts["oom_kills"], int)
    assert facts["oom_kills"] >= 1, facts
    if log is None:
        return None
    messages = log.messages()
    victims = oom_victims(messages)
    assert pid in victims, f"no OOM kill of pid {pid} in the kernel log: {messages}"
    return victims


@pytest.mark.asyncio
async def test_a_plain_stdlib_server_holding_memory_is_killed_by_the_kernel(
    tmp_path: Path, kernel_log: KernelLog | None
) -> None:
    process = plain_server(tmp_path, ballast_mib=200)
    try:
        pid, port = process.pid, process.address()
        ctx = FaultContext(history=History(), processes={"plain": process})
        async with applied(Oom(target="plain"), ctx) as facts:
            assert process.exit_code() == -9
        _assert_kernel_kill(facts, pid, kernel_log)
        assert isinstance(facts["resident_mib"], float)
        assert facts["resident_mib"] >= 200, "its memory stayed charged outside the 0-byte cage"
        assert process.address() == port
        assert get_json(process)["pid"] == process.pid != pid, "heal restarted it on its port"
    finally:
        process.stop()


@pytest.mark.slow  # starts the tiny policy server
@pytest.mark.asyncio
async def test_the_tiny_torch_policy_server_is_killed_by_the_kernel(
    tmp_path: Path, kernel_log: KernelLog | None
) -> None:
    process = ManagedProcess(tiny_policy_spec(REPO / "fixtures" / "tiny-llama"), tmp_path)
    process.start()
    try:
        pid = process.pid
        ctx = FaultContext(history=History(), processes={"policy": process})
        async with applied(Oom(target="policy", restart_on_heal=False), ctx) as facts:
            pass
        _assert_kernel_kill(facts, pid, kernel_log)
        assert isinstance(facts["resident_mib"], float)
        assert facts["resident_mib"] >= 100, "torch and the model are resident"
    finally:
        process.stop()


@pytest.mark.asyncio
async def test_the_kernel_picks_the_server_over_a_bigger_child_and_none_survive(
    tmp_path: Path, kernel_log: KernelLog | None
) -> None:
    process = plain_server(tmp_path, child_mib=150)
    try:
        pid, child = process.pid, get_json(process)["child"]
        ctx = FaultContext(history=History(), processes={"plain": process})
        async with applied(Oom(target="plain", restart_on_heal=False), ctx) as facts:
            pass
        victims = _assert_kernel_kill(facts, pid, kernel_log)
        if victims is not None:  # its oom_score_adj made the server the kernel's first choice
            assert victims[0] == pid, f"the kernel killed {victims} (server {pid}, child {child})"
        assert not _alive(child), "what the OOM killer left of the group is killed too"
    finally:
        process.stop()


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
