"""exit_zero against a stdlib server that knows nothing of it: the real exit status, never a claimed 0.

The fault asks by signal; a server that shuts down cleanly on it exits 0 and the facts say
so. One that is killed by the signal, exits non-zero, or ignores it is not passed off as an
exit 0: inject fails naming the real status, and the History holds the real exit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.faults.exit_zero import ExitZero
from pytest_rollout_chaos.history import Event, History
from tests.faults._applied import applied
from tests.faults._hooked import wait_for
from tests.integration.faults._anyprocess import get_json, plain_server


def _exits(history: History) -> list[Event]:
    return wait_for(history, lambda event: event.source == "process" and event.op == "exit")


@pytest.mark.asyncio
async def test_a_server_with_a_graceful_shutdown_exits_zero_and_comes_back(tmp_path: Path) -> None:
    process = plain_server(tmp_path, "graceful")
    try:
        history = History()
        ctx = FaultContext(history=history, processes={"plain": process})
        pid, port = process.pid, process.address()
        async with applied(ExitZero(target="plain"), ctx) as facts:
            assert process.exit_code() == 0
        assert facts == {"pid": pid, "signal": "SIGINT", "code": 0}
        assert "plain server stopped" in process.log_tail(), "it ran its own shutdown"
        assert _exits(history)[0].data == {"server": "plain", "code": 0, "signal": None}
        assert process.address() == port
        assert get_json(process)["pid"] == process.pid != pid
    finally:
        process.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("mode", "signal", "expected"),
    [
        ("default", "SIGTERM", (143, "killed by SIGTERM", 15)),  # no handler: Python dies of it
        ("default", "SIGINT", (130, "killed by SIGINT", 2)),  # KeyboardInterrupt, re-raised as SIGINT
        ("fails", "SIGTERM", (3, "its own exit code", None)),
    ],
)
async def test_a_server_that_does_not_exit_zero_is_reported_as_it_exited(
    tmp_path: Path,
    mode: str,
    signal: Literal["SIGINT", "SIGTERM"],
    expected: tuple[int, str, int | None],
) -> None:
    status, how, exit_signal = expected
    process = plain_server(tmp_path, mode)
    try:
        history = History()
        ctx = FaultContext(history=history, processes={"plain": process})
        pid = process.pid
        with pytest.raises(FaultError) as info:
            async with applied(ExitZero(target="plain", signal=signal), ctx):
                pytest.fail("inject must fail when the exit status is not 0")
        assert f"exited with status {status} ({how}) on {signal}, not 0" in str(info.value)
        assert f"pid {pid}" in str(info.value)
        assert _exits(history)[0].data == {"server": "plain", "code": status, "signal": exit_signal}
        (inject,) = history.events(source="fault", op="inject")
        assert "not 0" in str(inject.data["error"])
        assert process.is_running(), "heal restarts it all the same"
    finally:
        process.stop()


@pytest.mark.asyncio
async def test_a_server_that_ignores_the_signal_is_killed_after_grace_and_reported(tmp_path: Path) -> None:
    process = plain_server(tmp_path, "ignore")
    try:
        history = History()
        ctx = FaultContext(history=history, processes={"plain": process})
        with pytest.raises(
            FaultError, match=r"still ran 0\.5s after SIGINT, so it was killed \(exit status 137\)"
        ):
            async with applied(ExitZero(target="plain", grace_s=0.5, restart_on_heal=False), ctx):
                pass
        assert _exits(history)[0].data == {"server": "plain", "code": 137, "signal": 9}
        assert not process.is_running()
    finally:
        process.stop()
