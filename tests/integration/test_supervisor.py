"""The process supervisor against a real child program: readiness, early exit, deadline, teardown."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from pytest_rollout_chaos.errors import ServerCrashedError, ServerStartError
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.process import SUPERVISOR_PID_ENV, ManagedProcess, ServerSpec

CHILD = (sys.executable, "-m", "tests.programs.child_server")
REPO = Path(__file__).resolve().parents[2]
READY = readiness.all_of(readiness.address_known(), readiness.http_ok("/health"))


def _spec(*args: str, timeout_s: float = 20.0, name: str = "child") -> ServerSpec:
    return ServerSpec(
        name=name,
        argv=(*CHILD, *args),
        probe=READY,
        ready_timeout_s=timeout_s,
        cwd=REPO,
        hint="see tests/programs/child_server.py",
    )


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _wait_dead(pids: list[int], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def test_ready_server_reports_its_os_chosen_port(tmp_path: Path) -> None:
    process = ManagedProcess(_spec(), tmp_path)
    process.start()
    try:
        address = process.address()
        assert address is not None
        assert address[0] == "127.0.0.1"
        assert address[1] > 0
        assert process.is_running()
        assert process.ready_after_s is not None
    finally:
        process.stop()
    assert not process.is_running()


def test_early_exit_is_reported_fast_with_code_and_log_tail(tmp_path: Path) -> None:
    process = ManagedProcess(_spec("--mode", "exit", "--code", "7", timeout_s=30.0), tmp_path)
    started = time.monotonic()
    with pytest.raises(ServerStartError) as info:
        process.start()
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert "exited with code 7" in message
    assert "simulated startup failure" in message  # the log tail
    assert "hint: see tests/programs/child_server.py" in message
    assert elapsed < 15.0, f"early exit noticed only after {elapsed:.1f}s of a 30s limit"


def test_exit_code_zero_before_ready_counts_as_crash(tmp_path: Path) -> None:
    process = ManagedProcess(_spec("--mode", "exit", "--code", "0"), tmp_path)
    with pytest.raises(ServerStartError, match="exit code 0 counts as a crash"):
        process.start()


def test_never_ready_child_is_killed_at_the_deadline(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    process = ManagedProcess(_spec("--mode", "never", "--pid-file", str(pid_file), timeout_s=1.5), tmp_path)
    with pytest.raises(ServerStartError) as info:
        process.start()
    assert "was not ready after" in str(info.value)
    assert "limit 1.5s" in str(info.value)
    pid = int(pid_file.read_text().split()[0])
    assert _wait_dead([pid], 2.0) == []


def test_unexpected_exit_zero_while_running_is_a_crash(tmp_path: Path) -> None:
    process = ManagedProcess(_spec(), tmp_path)
    process.start()
    exits: list[int] = []
    process.add_exit_listener(lambda _process, code: exits.append(code))
    try:
        os.kill(process.pid, signal.SIGTERM)  # serve() exits 0 on SIGTERM
        deadline = time.monotonic() + 10
        while process.is_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ServerCrashedError, match="exited with code 0 while still needed"):
            process.ensure_running()
        assert exits == [0]
    finally:
        process.stop()


def test_stop_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    process = ManagedProcess(_spec("--grandchild", "--pid-file", str(pid_file)), tmp_path)
    process.start()
    pids = [int(pid) for pid in pid_file.read_text().split()]
    assert len(pids) == 2
    process.stop()
    assert _wait_dead(pids, 2.0) == []


def test_stop_of_a_frozen_child_still_ends_it(tmp_path: Path) -> None:
    process = ManagedProcess(_spec(), tmp_path)
    process.start()
    process.signal(signal.SIGSTOP)
    process.stop()
    assert not _alive(process.pid)


_HOLDING_TEST = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytest_rollout_chaos.servers import readiness
    from pytest_rollout_chaos.servers.process import ServerSpec

    def test_hold(make_chaos_server):
        spec = ServerSpec(
            name="held",
            argv=(sys.executable, "-m", "tests.programs.child_server", "--grandchild",
                  "--pid-file", {pid_file!r}),
            probe=readiness.all_of(readiness.address_known(), readiness.http_ok("/health")),
            cwd={repo!r},
        )
        make_chaos_server(spec)
        Path({marker!r}).write_text("ready")
        time.sleep(120)
    """
)


def _run_holding_pytest(tmp_path: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    pid_file = tmp_path / "pids"
    marker = tmp_path / "marker"
    test_dir = tmp_path / "project"
    test_dir.mkdir()
    (test_dir / "test_hold.py").write_text(
        _HOLDING_TEST.format(pid_file=str(pid_file), marker=str(marker), repo=str(REPO))
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    pytest_process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--rollout-chaos",
            "-p",
            "no:cacheprovider",
            "-q",
            str(test_dir / "test_hold.py"),
        ],
        cwd=test_dir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists():
        if time.monotonic() > deadline or pytest_process.poll() is not None:
            pytest_process.kill()
            pytest.fail("the inner pytest never started its server")
        time.sleep(0.1)
    return pytest_process, [int(pid) for pid in pid_file.read_text().split()]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_no_server_outlives_pytest(tmp_path: Path, sig: signal.Signals) -> None:
    pytest_process, pids = _run_holding_pytest(tmp_path)
    assert all(_alive(pid) for pid in pids)
    os.kill(pytest_process.pid, sig)
    pytest_process.wait(timeout=30)
    assert _wait_dead(pids, 2.0) == [], f"server processes outlived pytest after {sig.name}"


def test_a_started_server_is_told_who_supervises_it(tmp_path: Path) -> None:
    process = ManagedProcess(_spec(), tmp_path)
    process.start()
    try:
        environ = Path(f"/proc/{process.pid}/environ").read_bytes().split(b"\0")
    finally:
        process.stop()
    assert f"{SUPERVISOR_PID_ENV}={os.getpid()}".encode() in environ


# A supervisor that spawns a server and is gone at once, before the server has finished importing
# (as pytest SIGKILLed while torch loads): the server's die-with-parent watch starts only then.
_SHORT_LIVED_SUPERVISOR = textwrap.dedent(
    """
    import os, subprocess, sys
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.programs.child_server", "--mode", "never", "--delay-s", "1"],
        env={{**os.environ, {env!r}: str(os.getpid())}},
        cwd={repo!r},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    print(child.pid, flush=True)
    """
)


def test_a_server_whose_supervisor_died_while_it_started_exits() -> None:
    script = _SHORT_LIVED_SUPERVISOR.format(env=SUPERVISOR_PID_ENV, repo=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    orphan = int(done.stdout.strip())
    try:
        assert _wait_dead([orphan], 15.0) == [], "the orphan watched its adopter instead of exiting"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan, signal.SIGKILL)


def test_a_server_behind_a_forking_launcher_keeps_running_while_its_supervisor_lives(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = f"{shlex.join([*CHILD, '--mode', 'never', '--pid-file', str(pid_file)])}; true"
    launcher = subprocess.Popen(
        ["sh", "-c", command],  # sh forks the server: its parent is sh, not this process
        env={**os.environ, SUPERVISOR_PID_ENV: str(os.getpid())},
        cwd=REPO,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        server = int(pid_file.read_text().split()[0])
        time.sleep(1.0)  # past its die-with-parent check
        assert _alive(server), "a server whose supervisor lives must keep running"
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=10)
