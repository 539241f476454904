"""ChaosHarness: the session's owner of everything started, and its stateful pytest hooks.

Registered as a plugin object in ``pytest_configure`` (as xdist does with ``DSession``) only
when ``--rollout-chaos`` is on. It is a ``ProcessKeeper`` (every server on one ``ExitStack``),
closed at session end, on Ctrl-C, on SIGTERM (turned into KeyboardInterrupt) and at
unconfigure; a cleanup error is logged, never allowed to mask the test's own failure. The reaper covers the
one path no hook sees: pytest killed with SIGKILL.

A Python test that injects faults through ``chaos_faults`` (or ``chaos_fault`` markers) is
checked like a scenario at the end of its call: a fault that touched nothing of what the test
collected fails it with the scenario's message (``injector.FaultInjector.unacted``).

Starting the servers takes seconds (minutes with vLLM), so each one says it is ready on the
terminal as it is (the keeper's lines; not under ``-qq``, nor in an xdist worker, whose output
nobody reads); the
section at the end is one line per scenario under ``-q``, its marks in pytest's colours. When
pytest-html writes its report (``--html``), each scenario's section of ours (story, verdicts,
timeline) goes into the scenario's row there as an extra.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Generator
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

import pytest

from pytest_rollout_chaos.report import logs
from pytest_rollout_chaos.report.record import ScenarioRecord
from pytest_rollout_chaos.report.reports import RESULT_KEY, ScenarioReports
from pytest_rollout_chaos.report.run_info import ServerLog, describe_run
from pytest_rollout_chaos.report.summary import ITEM_COLOURS
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.settings import ChaosSettings

if TYPE_CHECKING:
    from pytest_rollout_chaos.injector import FaultInjector

# The test's fault injector, kept by the chaos_faults fixture for the check after the call.
INJECTOR_KEY: Final[pytest.StashKey[FaultInjector]] = pytest.StashKey()


class ChaosHarness(ProcessKeeper):
    """The session's ``ProcessKeeper`` (starts servers for fixtures, stops them on every path),
    with the hooks that report their logs."""

    def __init__(self, settings: ChaosSettings) -> None:
        super().__init__(tell=self._tell)
        self.settings = settings
        self._previous_sigterm: Callable[[int, FrameType | None], Any] | int | None = None
        self.reports = ScenarioReports(settings.report, settings.json_report)
        self._progress: pytest.TerminalReporter | None = None  # where servers say they are ready
        self._capture: Any = None  # pytest's capture manager, which the lines must get past

    # -- signals --------------------------------------------------------------------------------
    def install_sigterm_handler(self) -> None:
        """Turn SIGTERM into KeyboardInterrupt so pytest runs its teardown (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._previous_sigterm = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)

    def restore_sigterm_handler(self) -> None:
        if self._previous_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    # -- hooks ----------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        if call.when == "call" and getattr(item, "scenario", None) is not None:
            from pytest_rollout_chaos.scenario_items import add_junit_properties

            add_junit_properties(item)  # before pytest copies them into the call's report
        report = yield
        record = self.reports.observe(item, report)
        if record is not None and item.config.getoption("htmlpath", None):
            _add_pytest_html_extra(item.config, report, record)
        if report.failed and self._processes:
            result = item.stash.get(RESULT_KEY, None)  # a scenario's; a Python test has none
            report.sections.extend(logs.sections(self.settings.logs, self._processes, result, when=call.when))
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        """A test that passed with a fault that touched nothing tested nothing there: it fails."""
        outcome = yield  # a test that failed or skipped stands as it is
        injector = item.stash.get(INJECTOR_KEY, None)
        if injector is not None and (lines := injector.unacted()):
            from pytest_rollout_chaos.engine.story import unacted_text

            pytest.fail(unacted_text(lines, what="test"), pytrace=False)
        return outcome

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        self.reports.start(config, describe_run(config, self.settings))
        if config.get_verbosity() > -2 and not hasattr(config, "workerinput"):
            self._progress = config.pluginmanager.get_plugin("terminalreporter")
            self._capture = config.pluginmanager.get_plugin("capturemanager")

    @pytest.hookimpl(trylast=True)  # after the terminal reporter wrote the item's status
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.progress(report)

    # -- progress while the servers start ----------------------------------------------------------
    def _tell(self, line: str) -> None:
        """``line`` on the terminal now, though the servers start inside a test's setup, whose
        output pytest captures (as its live logging does); the keeper calls it one line at a time."""
        if self._progress is None:
            return
        disabled = getattr(self._capture, "global_and_fixture_disabled", contextlib.nullcontext)
        with disabled():
            self._progress.write_line(line)

    def pytest_keyboard_interrupt(self) -> None:
        self.close()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        try:
            logs = [ServerLog(process.name, str(process.log_path)) for process in self._processes]
            self.reports.finish(session.config, self.summary_lines, logs)
        finally:
            self.close()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist controller: a worker finished; merge the scenarios it reported."""
        self.reports.node_down(node, error)

    def pytest_unconfigure(self) -> None:
        self.close()
        self.restore_sigterm_handler()

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        config = terminalreporter.config
        writer = config.get_terminal_writer()  # its markup follows --color and the terminal

        def paint(text: str, outcome: str) -> str:
            return writer.markup(text, **{"bold": True, ITEM_COLOURS.get(outcome, "bold"): True})

        verbosity = config.get_verbosity()
        lines = self.reports.summary(verbose=verbosity > 0, compact=verbosity < 0, paint=paint)
        if lines:
            terminalreporter.section("rollout-chaos")
            for line in lines:
                terminalreporter.write_line(line)


def _add_pytest_html_extra(config: pytest.Config, report: pytest.TestReport, record: ScenarioRecord) -> None:
    """With pytest-html writing its report (``--html``), the scenario's section (its story and
    timeline) goes into the item's row there, through pytest-html's documented ``report.extras``."""
    pytest_html = config.pluginmanager.get_plugin("html")
    extras = getattr(pytest_html, "extras", None)
    if extras is None:  # another plugin of that name, or a pytest-html without extras
        return
    from pytest_rollout_chaos.report.html import embedded

    report.extras = [*getattr(report, "extras", []), extras.html(embedded(record))]  # type: ignore[attr-defined]


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"received signal {signum}")
