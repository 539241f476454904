"""Running one side of the gate: the scenarios against one trainer tree, in a pytest subprocess.

The child is an ordinary ``pytest --rollout-chaos`` run with ``--rollout-chaos-upstream`` naming
the tree, so what the gate judges is exactly what a user's own run would. Its output is followed
line by line (``progress.SideProgress``: scenario k of n, elapsed, an estimate of what is left);
the whole run has a deadline, and the child's process group is registered
with the reaper, so it is stopped on every path, the gate itself being killed included.
``run_sides`` runs the two sides at the same time (each waits on its child far more than it
computes), or one after the other; either way a Ctrl-C or an error stops every child still running,
and no wait is without a deadline.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Final, Protocol

from pytest_rollout_chaos.errors import ChaosError
from pytest_rollout_chaos.gate.environment import SideEnvironment
from pytest_rollout_chaos.gate.progress import SideProgress
from pytest_rollout_chaos.gate.verdicts import ScenarioVerdicts, read_junit
from pytest_rollout_chaos.servers.process import stop_group
from pytest_rollout_chaos.servers.reaper_client import reaper

ARCHIVE_SUFFIXES: Final = (".tar.gz", ".tgz", ".tar")
STOP_GRACE_S: Final = 15.0
# How long a side takes to stop once told: its output is looked at every second, then its child
# has ``STOP_GRACE_S`` to end after SIGTERM and as long again after SIGKILL.
STOP_WITHIN_S: Final = 1.0 + 2 * STOP_GRACE_S + 5.0
OUTPUT_TAIL_LINES: Final = 40


class GateUsageError(ChaosError):
    """The gate cannot run as asked (a tree that does not exist, an interpreter without the plugin)."""


class SidesOverdueError(ChaosError):
    """A side ran past its deadline and did not stop when told: the gate gives up waiting on it."""


@dataclass(frozen=True, slots=True)
class SideRequest:
    """What both sides share: the trainer, the interpreter, the seed, the scenarios, the deadline."""

    target: str
    python: str
    seed: int
    scenarios: Sequence[str]
    pytest_args: Sequence[str] = ()
    timeout_s: float = 1800.0
    python_from: str = ""  # who named ``python``: an option, an environment variable, or none


@dataclass(slots=True)
class SideRun:
    """One side's run: where its tree was, how the child ended, and its verdicts."""

    label: str
    tree: Path
    exit_code: int | None = None
    wall_s: float = 0.0
    timed_out: bool = False
    verdicts: dict[str, ScenarioVerdicts] = field(default_factory=dict)
    log: Path | None = None
    output_tail: list[str] = field(default_factory=list)
    environment: SideEnvironment | None = None  # the trainer's commit and the versions that ran it
    started: float = 0.0  # time.monotonic() as its child started, and once it had ended: whether
    ended: float = 0.0  # two sides overlapped, on one clock for every process of this machine

    def to_json(self) -> dict[str, object]:
        return {
            "tree": str(self.tree),
            "environment": self.environment.to_json() if self.environment is not None else None,
            "exit_code": self.exit_code,
            "wall_s": round(self.wall_s, 1),
            "timed_out": self.timed_out,
            "log": str(self.log) if self.log else None,
        }


def prepare_tree(path: Path, scratch: Path) -> Path:
    """The folder to put on ``sys.path``: ``path`` itself, or where its archive was unpacked (into
    ``scratch``, a folder of its own).

    A ``git archive`` tarball holds one top folder named after the tree; that folder is the root.
    """
    if path.is_dir():
        return path.resolve()
    if not path.exists():
        raise GateUsageError(f"{path}: no such folder or archive (valid: a checkout, or a .tar.gz of one)")
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        raise GateUsageError(f"{path}: not a folder nor a {', '.join(ARCHIVE_SUFFIXES)} archive")
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(path) as archive:
            archive.extractall(scratch, filter="data")
    except (tarfile.TarError, OSError) as error:
        raise GateUsageError(f"{path}: cannot unpack ({error})") from error
    entries = list(scratch.iterdir())
    return entries[0].resolve() if len(entries) == 1 and entries[0].is_dir() else scratch.resolve()


def check_python(python: str, named_by: str = "--python") -> None:
    """The interpreter (``named_by`` an option or an environment variable) must run pytest with
    this plugin; say so before anything starts."""
    try:
        subprocess.run(
            [python, "-c", "import pytest, pytest_rollout_chaos"],
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        detail = getattr(error, "stderr", b"") or b""
        raise GateUsageError(
            f"{_named(python, named_by)}: cannot import pytest and pytest_rollout_chaos "
            f"({detail.decode(errors='replace').strip().splitlines()[-1:] or error}); "
            "valid: an interpreter of the trainer's environment with pytest-rollout-chaos installed"
        ) from error


def _named(python: str, named_by: str) -> str:
    """``--python X``, ``ROLLOUT_CHAOS_NEMO_RL_PYTHON=X`` or ``X (the gate's own interpreter)``."""
    if named_by.startswith("--"):
        return f"{named_by} {python}"
    if named_by.isupper():
        return f"{named_by}={python}"
    return f"{python} ({named_by})"


def command(request: SideRequest, tree: Path, junit: Path, basetemp: Path) -> list[str]:
    """The child's command line: an ordinary chaos run, verbose so its progress can be followed."""
    return [
        request.python,
        "-m",
        "pytest",
        "--rollout-chaos",
        f"--rollout-chaos-target={request.target}",
        f"--rollout-chaos-upstream={tree}",
        f"--rollout-chaos-seed={request.seed}",
        "-p",
        "no:cacheprovider",
        "-v",
        "-rs",
        f"--junitxml={junit}",
        f"--basetemp={basetemp}",
        *request.pytest_args,
        *request.scenarios,
    ]


def run_side(
    label: str,
    tree: Path,
    request: SideRequest,
    scratch: Path,
    progress: Callable[[str], None],
    *,
    environment: SideEnvironment | None = None,
    stop: threading.Event | None = None,
) -> SideRun:
    """Run the scenarios against ``tree``; its progress lines go to ``progress`` as they come.
    Setting ``stop`` (another side's Ctrl-C or error) stops the child within a second or so."""
    workdir = scratch / label
    workdir.mkdir(parents=True, exist_ok=True)
    junit, log = workdir / "junit.xml", workdir / "pytest.log"
    run = SideRun(label=label, tree=tree, log=log, environment=environment)
    follower = SideProgress(label, progress)
    follower.begin(f"pytest on {tree} ({request.python})")
    started = run.started = time.monotonic()
    child = subprocess.Popen(
        command(request, tree, junit, workdir / "tmp"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    reaper().add(child.pid)
    try:
        deadline = started + request.timeout_s
        stop = stop or threading.Event()
        ended = _follow(child, log, run, deadline, follower, stop=stop)
        run.timed_out = not ended and not stop.is_set()
    finally:
        stop_group(child, grace_s=STOP_GRACE_S)
        reaper().remove(child.pid)
        if child.stdout is not None:
            child.stdout.close()
    run.exit_code = child.returncode
    run.ended = time.monotonic()
    run.wall_s = run.ended - started
    follower.end(run.exit_code, timed_out=run.timed_out, stopped=not ended and not run.timed_out)
    if junit.is_file():
        run.verdicts = read_junit(junit)
    return run


class SideJob(Protocol):
    """One side to run: ``run_side`` with all but ``stop`` given."""

    def __call__(self, *, stop: threading.Event) -> SideRun: ...


def run_sides(jobs: Sequence[SideJob], *, at_once: bool, timeout_s: float) -> list[SideRun]:
    """Each job's ``SideRun``, in order, the jobs run at the same time (``at_once``) or one after the
    other. Each job is handed one shared event: set when the gate is interrupted or a job raised,
    so every child still running is stopped before the error goes on. ``timeout_s`` is the jobs'
    own deadline (``SideRequest.timeout_s``); a job still running past it and ``STOP_WITHIN_S`` is
    an error, never a wait without end."""
    stop = threading.Event()
    if not at_once:
        return [job(stop=stop) for job in jobs]
    pool = ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="gate-side")
    futures: list[Future[SideRun]] = []
    try:
        for job in jobs:  # one at a time, so an interrupt between two leaves none unwaited
            futures.append(pool.submit(job, stop=stop))
        return _results(futures, timeout_s + STOP_WITHIN_S)
    except BaseException:
        stop.set()  # each job stops its child: within a second, then its grace
        wait(futures, timeout=STOP_WITHIN_S)
        raise
    finally:
        pool.shutdown(wait=False)


def _results(futures: Sequence[Future[SideRun]], within_s: float) -> list[SideRun]:
    """Every job's run, once all have ended; the first error as soon as one raises."""
    done, running = wait(futures, timeout=within_s, return_when=FIRST_EXCEPTION)
    for future in done:
        future.result()  # a job's error, raised here
    if running:
        raise SidesOverdueError(
            f"{len(running)} side(s) still running {within_s:.0f}s after they started: past their "
            "deadline (--timeout-s) and the time it takes to stop them"
        )
    return [future.result() for future in futures]


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` in the main thread meanwhile, so a gate stopped by a CI
    runner or ``kill`` stops its sides' children as a Ctrl-C does (a side's own ``finally``, or
    ``run_sides``' stop event), instead of leaving them to the reaper's SIGKILL."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler; a SIGTERM there ends the process as before
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"received signal {signum}")


def _follow(
    child: subprocess.Popen[str],
    log: Path,
    run: SideRun,
    deadline: float,
    follower: SideProgress,
    *,
    stop: threading.Event,
) -> bool:
    """Copy the child's output to ``log`` and each line to ``follower``; False at the deadline or
    when ``stop`` is set."""
    lines: queue.Queue[str | None] = queue.Queue()
    assert child.stdout is not None
    stdout = child.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, name=f"gate-{run.label}-output", daemon=True).start()
    with log.open("w", encoding="utf-8") as sink:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or stop.is_set():
                return False
            try:
                line = lines.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                follower.tick()
                continue
            if line is None:
                return True
            sink.write(line)
            run.output_tail = [*run.output_tail[-(OUTPUT_TAIL_LINES - 1) :], line.rstrip("\n")]
            follower.line(line)
