"""The reaper against real processes: it kills what its owner registered when the owner dies, and,
given a controller to watch (an xdist worker's reaper), also when the controller dies, taking
the owner with it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pytest_rollout_chaos.servers import reaper

REPO = Path(__file__).resolve().parents[2]
GONE_S = 3.0
# An owner, as a pytest worker would be: it starts a server in its own group and a reaper
# (watching argv[1] when given), registers the group, says who is who, and waits to be killed.
OWNER = textwrap.dedent(
    """\
    import json, subprocess, sys, time
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    watch = ["--watch", sys.argv[1]] if len(sys.argv) > 1 else []
    reaper = subprocess.Popen(
        [sys.executable, "-m", "pytest_rollout_chaos.servers.reaper", *watch],
        stdin=subprocess.PIPE, start_new_session=True,
    )
    reaper.stdin.write(f"add {server.pid}\\n".encode())
    reaper.stdin.flush()
    print(json.dumps({"server": server.pid, "reaper": reaper.pid}), flush=True)
    time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _gone_within(pids: list[int], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return [pid for pid in pids if _alive(pid)]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing for the controlling pytest."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


@contextlib.contextmanager
def _owner(*argv: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, int]]]:
    """The owner and its server's and reaper's pids; everything killed on the way out."""
    pids: dict[str, int] = {}
    with subprocess.Popen(
        [sys.executable, "-c", OWNER, *argv], cwd=REPO, stdout=subprocess.PIPE, text=True
    ) as owner:
        try:
            assert owner.stdout is not None
            line = owner.stdout.readline()
            assert line, f"the owner exited with {owner.wait()} before starting its server and reaper"
            pids = json.loads(line)
            yield owner, pids
        finally:
            owner.kill()
            for pid in pids.values():
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


def test_the_reaper_kills_the_registered_group_when_its_owner_dies() -> None:
    with _owner() as (owner, pids):
        time.sleep(0.3)  # the registration is on its way through the pipe
        owner.kill()
        owner.wait()
        assert _gone_within([pids["server"], pids["reaper"]], GONE_S) == []


def test_a_watching_reaper_acts_when_the_controller_dies_and_takes_its_owner(
    sleeper: subprocess.Popen[bytes],
) -> None:
    with _owner(str(sleeper.pid)) as (owner, pids):
        time.sleep(0.3)
        assert _alive(owner.pid), "a living controller leaves the owner alone"
        sleeper.kill()  # not waited for: a dead controller nobody has reaped yet is a zombie
        left = _gone_within([owner.pid, pids["server"], pids["reaper"]], GONE_S)
        assert left == [], f"still alive {GONE_S}s after the controller died: {left}"


def test_a_zombie_counts_as_dead(sleeper: subprocess.Popen[bytes]) -> None:
    assert reaper._alive(sleeper.pid)
    sleeper.kill()
    deadline = time.monotonic() + GONE_S
    while psutil.Process(sleeper.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not reaper._alive(sleeper.pid), "exited, not yet reaped by its parent"


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=False)


@pytest.fixture
def namespace() -> Iterator[tuple[str, str]]:
    """A network namespace and a bridge: what ``hosts:N`` registers."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and `ip` (iproute2) to make a namespace and a bridge")
    name, link = f"rc-reap-{os.getpid() % 100000}", f"rc-rb{os.getpid() % 100000}"
    assert _ip("netns", "add", name).returncode == 0
    assert _ip("link", "add", link, "type", "bridge").returncode == 0
    try:
        yield name, link
    finally:
        for pid in _ip("netns", "pids", name).stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        _ip("netns", "del", name)
        _ip("link", "del", link)


def test_the_reaper_empties_and_deletes_registered_namespaces_and_links(namespace: tuple[str, str]) -> None:
    name, link = namespace
    inside = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "120"], start_new_session=True)
    watchdog = subprocess.Popen(
        [sys.executable, "-m", "pytest_rollout_chaos.servers.reaper"], stdin=subprocess.PIPE, cwd=REPO
    )
    try:
        assert watchdog.stdin is not None
        watchdog.stdin.write(f"add-netns {name}\nadd-link {link}\nadd-link rc-never-made\n".encode())
        watchdog.stdin.close()  # the owner is gone
        assert watchdog.wait(timeout=GONE_S) == 0
        assert inside.wait(timeout=GONE_S) == -signal.SIGKILL
        assert name not in _ip("netns", "list").stdout
        assert link not in _ip("link", "show").stdout
        assert f"/run/netns/{name}" not in Path("/proc/mounts").read_text()
    finally:
        for process in (inside, watchdog):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_names_that_are_no_link_are_not_passed_on() -> None:
    registry = reaper._Registry()
    registry.feed(b"add-link rc-br7\nadd-netns rc7-h0\nadd-link -rf /\nadd-link x y\nadd-netns \n")
    registry.feed(b"add 12\nadd-path /tmp/x\nremove-link rc-br7\nadd-link a-name-far-too-long-for-a-link\n")
    assert registry.links == set()
    assert registry.netns == {"rc7-h0"}
    assert registry.groups == {12}
    assert registry.paths == {"/tmp/x"}
