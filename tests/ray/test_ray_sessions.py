"""Whole pytest sessions with Ray on: nothing of a local cluster, nor of the hosts of ``hosts:3``
(namespaces, links, mounts, processes), outlives a SIGKILLed pytest, and a cluster started
separately with ``ray start --head`` is joined through its address."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rollout_chaos.servers.ports import free_port
from pytest_rollout_chaos.servers.reaper import naming
from tests.catalog._verdicts import CATALOG, REPO, parse_junit

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

READY_S = 180.0
GONE_S = 60.0
HOSTS_GONE_S = 5.0  # the reaper's whole sweep: processes, namespaces, links, mounts
HOLD = """
import os
import time
from pathlib import Path


def test_hold(chaos_stack):
    Path(os.environ["ROLLOUT_CHAOS_TEST_MARKER"]).write_text("up")
    time.sleep(600)
"""


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory for Ray's sockets (pytest's own tmp path may be too long for them)."""
    path = Path(tempfile.mkdtemp(prefix="rc-t-"))
    yield path
    for pid in naming({str(path)}):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def pytest_command(*args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "--rollout-chaos",
        *args,
    ]


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            children.setdefault(int(stat[stat.rfind(")") + 2 :].split()[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def running(pids: set[int]) -> dict[int, str]:
    """Those of ``pids`` alive (not zombies), with their command lines."""
    alive = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat[stat.rfind(")") + 2] not in "ZX":
                alive[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
    return alive


def wait_for(condition: object, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout_s:.0f}s; log:\n{log.read_text(errors='replace')[-4000:]}")
        time.sleep(0.5)


def test_nothing_of_the_cluster_outlives_a_sigkilled_pytest(tmp_path: Path, short_dir: Path) -> None:
    test_file = tmp_path / "test_hold.py"
    test_file.write_text(HOLD)
    marker = tmp_path / "up"
    log = tmp_path / "child.log"
    with log.open("w") as out:
        child = subprocess.Popen(
            pytest_command("--rollout-chaos-ray=local:2", f"--basetemp={short_dir / 'b'}", str(test_file)),
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ROLLOUT_CHAOS_TEST_MARKER": str(marker)},
            start_new_session=True,
        )
    ours: set[int] = set()
    try:
        wait_for(lambda: marker.exists() or child.poll() is not None, READY_S, "the stack was not up", log)
        assert child.poll() is None, log.read_text()[-4000:]
        ours = descendants(child.pid) | set(naming({str(short_dir)}))
        commands = " ".join(running(ours).values())
        for part in ("raylet", "gcs_server", "ray::ServerHost", "pytest_rollout_chaos.servers.policy"):
            assert part in commands, f"{part} not among the session's processes: {commands}"
        os.kill(child.pid, signal.SIGKILL)  # pytest alone: no teardown, no atexit
        child.wait(timeout=10)
        wait_for(lambda: not running(ours), GONE_S, f"processes left: {running(ours)}", log)
    finally:
        if child.poll() is None:
            child.kill()
        for pid in ours:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_cluster_started_with_ray_start_is_joined_through_its_address(
    tmp_path: Path, short_dir: Path
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "RAY_TMPDIR": str(short_dir),
    }
    head_log = tmp_path / "head.log"
    with head_log.open("w") as out:
        head = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ray.scripts.scripts",
                "start",
                "--head",
                "--block",
                f"--port={port}",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=2",
                "--object-store-memory=80000000",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={short_dir / 'r'}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: "Ray runtime started" in head_log.read_text(),
            READY_S,
            "ray start --head failed",
            head_log,
        )
        junit = tmp_path / "junit.xml"
        scenarios = ("baseline", "agent-actor-restarted", "rollout-node-lost")
        completed = subprocess.run(
            pytest_command(
                f"--rollout-chaos-ray=127.0.0.1:{port}",
                f"--junitxml={junit}",
                f"--basetemp={tmp_path / 'inner'}",
                "-rs",
                *(str(CATALOG / f"{name}.chaos.yaml") for name in scenarios),
            ),
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        output = completed.stdout[-6000:] + completed.stderr[-2000:]
        verdicts = parse_junit(junit)
        assert verdicts["baseline"].passed, output
        assert verdicts["agent-actor-restarted"].passed, output
        assert "which this run joined" in str(verdicts["rollout-node-lost"].skipped), output
        assert f"cluster at 127.0.0.1:{port}" in completed.stdout, output
        assert head.poll() is None, "the joined cluster was stopped by the session that joined it"
        left = [command for command in running(descendants(head.pid)).values() if "ServerHost" in command]
        assert not left, f"server actors left on the joined cluster: {left}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=10)


def hosts_of_ours(before: set[str]) -> tuple[set[str], set[str], set[str]]:
    """The namespaces, links and ``/run/netns`` mounts of ``hosts:N`` made since ``before`` (links
    then): what a run's ``rc-brS`` bridge, ``rcS-vK`` veths and ``rcS-hK`` namespaces add."""
    ours = {name for name in link_names() - before if name.startswith("rc")}
    subnets = {name.removeprefix("rc-br") for name in ours if name.startswith("rc-br")}
    listed = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True
    ).stdout.split()
    namespaces = {name for name in listed if any(name.startswith(f"rc{subnet}-h") for subnet in subnets)}
    mounts = {
        line.split()[1]
        for line in Path("/proc/mounts").read_text().splitlines()
        if any(f"/run/netns/rc{subnet}-h" in line for subnet in subnets)
    }
    return namespaces, ours, mounts


def link_names() -> set[str]:
    listed = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().partition("@")[0] for line in listed.splitlines()}


def test_nothing_of_the_hosts_outlives_a_pytest_sigkilled_mid_catalog(
    tmp_path: Path, short_dir: Path
) -> None:
    from pytest_rollout_chaos.ray import host_paths, netns

    if lacking := netns.missing():
        pytest.skip(f"hosts:N needs {'; '.join(lacking)}")
    if hidden := host_paths.hidden(host_paths.interpreter_paths()):
        pytest.skip(f"a host's private /tmp would hide {'; '.join(path.describe() for path in hidden)}")
    before = link_names()
    log = tmp_path / "child.log"
    with log.open("w") as out:
        child = subprocess.Popen(
            pytest_command(
                "--rollout-chaos-ray=hosts:3", f"--basetemp={short_dir / 'b'}", "-v", str(CATALOG)
            ),
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    ours: set[int] = set()
    namespaces: set[str] = set()
    try:
        # mid-catalog: a scenario has finished and others are still to run
        wait_for(
            lambda: " PASSED" in log.read_text() or child.poll() is not None, READY_S, "no scenario ran", log
        )
        assert child.poll() is None, log.read_text()[-4000:]
        namespaces, links, mounts = hosts_of_ours(before)
        assert len(namespaces) == 3, (namespaces, links)
        assert len(links) == 4, links  # the bridge and a veth per host
        assert len(mounts) == 3, mounts
        in_hosts = {int(pid) for name in namespaces for pid in netns_pids(name)}
        ours = descendants(child.pid) | set(naming({str(short_dir)})) | in_hosts
        commands = " ".join(running(ours).values())
        for part in ("raylet", "gcs_server", "ray::ServerHost", "ray::FileServer"):
            assert part in commands, f"{part} not among the session's processes: {commands}"
        assert in_hosts, "no process runs in the hosts' namespaces"

        os.kill(child.pid, signal.SIGKILL)  # pytest alone: no teardown, no atexit
        killed = time.monotonic()
        child.wait(timeout=10)

        def gone() -> bool:
            return not running(ours) and hosts_of_ours(before) == (set(), set(), set())

        while not gone() and time.monotonic() - killed < HOSTS_GONE_S:
            time.sleep(0.1)
        left = (running(ours), hosts_of_ours(before))
        assert gone(), f"{HOSTS_GONE_S:.0f}s after the SIGKILL still there: {left}\n{log.read_text()[-2000:]}"
    finally:
        if child.poll() is None:
            child.kill()
        for pid in ours:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for name in namespaces:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        for name in hosts_of_ours(before)[1]:
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)


def netns_pids(name: str) -> list[str]:
    return subprocess.run(
        ["ip", "netns", "pids", name], capture_output=True, text=True, check=False
    ).stdout.split()
