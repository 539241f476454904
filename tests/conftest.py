"""Test-suite wiring: pytester for plugin tests, inner runs configured, and the fast loop kept fast.

A run that selects no ``slow`` test (``pytest -m "not slow"``, or a unit-test folder such as
``tests/faults``) must start no policy or Gym server: every server the harness starts writes
``--- HH:MM:SS start: COMMAND`` at the top of its log under the run's base temporary directory,
inner pytester runs included, and at session end those lines are checked.
"""

from __future__ import annotations

import re
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.catalog._verdicts import UNUSED_PLUGINS

pytest_plugins = ["pytester"]

# Ctrl-C must reach what the tests start (the SIGINT tests send it to an inner pytest and to
# servers that rely on Python's own handler). A shell that runs the suite in the background
# starts it with SIGINT ignored, which every child would inherit; Python's default comes back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n``, an idle worker takes queued tests from the other (pytest-xdist's worksteal),
    unless another ``--dist`` was asked: "load", the default, keeps each worker's queue its own, so
    one worker could end alone on the last long child runs. Chosen here, not in the pytest
    settings, which the README's ``pytest --rollout-chaos`` reads without pytest-xdist installed."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling  # only under pytest-xdist

    return WorkStealingScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the modules with slow tests (child runs, the full stack) first, each
    module's tests kept together and in order: the workers start the long tests early and end
    together on the quick ones, which fill in around them."""
    if not hasattr(config, "workerinput"):  # not an xdist worker
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)


# Inner runs get pytest-asyncio's loop scope (so it does not warn), leave the built-in catalog out
# (a test names the scenarios it runs) and start without the plugins no child run uses.
INNER_ASYNCIO_INI = (
    "asyncio_default_fixture_loop_scope = function\nrollout_chaos_catalog = false\n"
    f"addopts = {' '.join(UNUSED_PLUGINS)}\n"
)


@pytest.fixture(autouse=True)
def _configure_inner_pytest_asyncio(request: pytest.FixtureRequest) -> None:
    """Inner pytester runs get pytest-asyncio's loop scope, so it does not warn in every run.

    A test that writes its own ini file includes ``INNER_ASYNCIO_INI`` in it.
    """
    if "pytester" in request.fixturenames:
        pytester: pytest.Pytester = request.getfixturevalue("pytester")
        pytester.makeini("[pytest]\n" + INNER_ASYNCIO_INI)


# The commands of the servers that make up the full stack: the policy (ours or vLLM) and the Gym
# servers (ours or NeMo Gym's). Toxiproxy and test programs are cheap and allowed.
START_LINE = re.compile(r"^--- [\d:]+ start: (?P<command>.*)$", re.MULTILINE)
FULL_STACK_COMMAND = re.compile(r"pytest_rollout_chaos[./]servers[./](policy|gym|nemo_gym)|vllm")


def full_stack_starts(under: Path) -> list[str]:
    """``log: command`` for each policy or Gym server start logged below ``under``.

    A program that lies below ``under`` itself is a fake a test made (a stand-in ``vllm`` in a
    throw-away virtual environment), not the real server, and is allowed.
    """
    found = []
    for log in sorted(under.rglob("*.log")):
        for start in START_LINE.finditer(log.read_text(encoding="utf-8", errors="replace")):
            command = start["command"]
            program = Path(command.split(" ", 1)[0])
            if FULL_STACK_COMMAND.search(command) and not program.is_relative_to(under):
                found.append(f"{log}: {command}")
    return found


@pytest.fixture(scope="session", autouse=True)
def _fast_runs_start_no_full_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """In a run without ``slow`` tests, fail at the end if any test started a policy or Gym server."""
    yield
    if any(item.get_closest_marker("slow") for item in request.session.items):
        return
    started = full_stack_starts(tmp_path_factory.getbasetemp())
    if started:
        listed = "\n".join(started[:20])
        pytest.fail(
            f"a test that is not marked slow started the full stack ({len(started)} server starts); "
            "mark it @pytest.mark.slow. The logs below name the folder: a pytester test's own, or "
            f"rollout-chaos-logs* for the session's chaos_* fixtures:\n{listed}",
            pytrace=False,
        )


@pytest.fixture
def gate_scratch_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gate that fails or cannot judge keeps its trees and logs in its scratch folder (made by
    ``tempfile.mkdtemp``) for its user to read; under test, that folder is made in the test's
    ``tmp_path``, which pytest clears in its turn, not in the machine's ``/tmp``."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
