"""``ScenarioReports``: the session's record of scenario items, fed by the harness's hooks.

After each scenario item's call phase (or a setup phase that ended it) it keeps the pytest
outcome and the facts of the item's run (the ``ScenarioResult`` stashed on the item). At session
end it writes the HTML page when ``--rollout-chaos-report`` is set and the JSON document when
``--rollout-chaos-json`` is, and it gives the terminal-summary lines.

Under pytest-xdist the scenarios run in the workers: each worker sends its records, its
environment lines and its servers' logs to the controller in ``config.workeroutput`` (xdist's
own channel, no file), and the controller writes the one page, the one JSON document and the one
summary of the run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import pytest

from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.report.record import ItemOutcome, ResultFacts, ScenarioFacts, ScenarioRecord
from pytest_rollout_chaos.report.run_info import RunInfo, ServerLog

if TYPE_CHECKING:
    from pytest_rollout_chaos.report.summary import Paint

_logger = logging.getLogger(__name__)
WORKER_OUTPUT_KEY: Final = "rollout_chaos_reports"
RESULT_KEY: Final = pytest.StashKey[ScenarioResult]()
"""Where pytest's side keeps a scenario item's result (``scenario_items.run_scenario``)."""
Role = Literal["single", "controller", "worker"]


class ScenarioReports:
    """Collects one ``ScenarioRecord`` per scenario item; writes the page; tells the summary."""

    def __init__(self, report_path: Path | None, json_path: Path | None = None) -> None:
        self.report_path = report_path
        self.json_path = json_path
        self.records: list[ScenarioRecord] = []
        self.run = RunInfo()
        self.written: Path | None = None
        self.json_written: Path | None = None
        self.write_errors: list[str] = []
        self._setup_s: dict[str, float] = {}  # nodeid -> duration of a setup that passed
        self.role: Role = "single"
        self.worker = ""
        self._reporter: Any = None

    def observe(self, item: pytest.Item, report: pytest.TestReport) -> ScenarioRecord | None:
        """Record ``item`` once: after its call, or after a setup that failed or skipped it; returns
        the record made for this report, if any."""
        scenario = getattr(item, "scenario", None)
        if scenario is None:
            return None
        if report.when == "setup" and report.passed:
            self._setup_s[item.nodeid] = report.duration
            return None
        if report.when == "teardown":
            return None
        outcome: ItemOutcome
        if report.when == "setup":
            outcome = "skipped" if report.skipped else "error"
        else:
            outcome = "passed" if report.passed else "skipped" if report.skipped else "failed"
        result = _result(item)
        self.records.append(
            ScenarioRecord(
                nodeid=item.nodeid,
                name=scenario.name,
                outcome=outcome,
                duration_s=report.duration,
                scenario=ScenarioFacts.of(scenario),
                result=ResultFacts.of(result) if result is not None else None,
                message="" if report.passed else _headline(report) if report.skipped else report.longreprtext,
                headline=_headline(report),
                events=tuple(result.history.events()) if result is not None else (),
                worker=self.worker,
                setup_s=report.duration if report.when == "setup" else self._setup_s.pop(item.nodeid, None),
                call_s=report.duration if report.when == "call" else None,
            )
        )
        return self.records[-1]

    def start(self, config: pytest.Config, run: RunInfo) -> None:
        """Learn this process's role under xdist; keep the terminal reporter under ``-v``."""
        self.run = run
        worker = getattr(config, "workerinput", None)
        if isinstance(worker, dict) and "workerid" in worker:
            self.role, self.worker = "worker", str(worker["workerid"])
        elif config.pluginmanager.has_plugin("dsession"):
            self.role = "controller"  # the items run in the workers
        if config.get_verbosity() > 0:
            self._reporter = config.pluginmanager.get_plugin("terminalreporter")

    def progress(self, report: pytest.TestReport) -> None:
        """Under a scenario's ``-v`` status line: its fault events with times, then its outcome."""
        if self._reporter is None or report.when != "call":
            return
        record = next((r for r in reversed(self.records) if r.nodeid == report.nodeid), None)
        if record is None or record.result is None:
            return
        from pytest_rollout_chaos.report.summary import progress_lines

        self._reporter.ensure_newline()
        for line in progress_lines(record):
            self._reporter.write_line(line)

    def finish(self, config: pytest.Config, environment: Sequence[str], logs: Sequence[ServerLog]) -> None:
        """At session end: a worker hands everything to the controller; the others write the page."""
        if self.role == "worker":
            output: dict[str, Any] = getattr(config, "workeroutput", {})
            output[WORKER_OUTPUT_KEY] = json.dumps(
                {
                    "records": [record.to_wire() for record in self.records],
                    "environment": list(environment),
                    "logs": [[log.name, log.path] for log in logs],
                }
            )
            return
        if self.role == "single":
            self.run.add_environment(list(environment))
            self.run.logs += logs
        self.write()

    def node_down(self, node: Any, error: object) -> None:
        """Controller: merge what a worker sent; a worker that died sent nothing, so say so."""
        worker = str(getattr(getattr(node, "gateway", None), "id", "?"))
        self.run.workers.append(worker)
        raw = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY)
        if raw is None:
            why = f" ({error})" if error else ""
            self.run.notes.append(
                f"worker {worker} went down before reporting{why}: its scenarios are missing"
            )
            return
        data = json.loads(raw)
        self.records += [ScenarioRecord.from_wire(text) for text in data["records"]]
        self.records.sort(key=lambda record: record.nodeid)
        self.run.add_environment([f"{worker}: {line}" for line in data["environment"]])
        self.run.logs += [ServerLog(name, path, worker) for name, path in data["logs"]]

    def write(self) -> Path | None:
        """Write the HTML page and the JSON document where paths were given; a failure is logged and
        told in the summary. Returns the page's path."""
        if self.json_path is not None:
            from pytest_rollout_chaos.report.json_report import write_json

            try:
                self.json_written = write_json(self.json_path, self.records, run=self.run)
            except Exception as error:  # the report must never mask the run's own outcome
                _logger.exception("writing the rollout-chaos JSON results failed")
                self.write_errors.append(f"json: could not write {self.json_path}: {error}")
        if self.report_path is None:
            return None
        from pytest_rollout_chaos.report.html import write_report

        try:
            self.written = write_report(self.report_path, self.records, run=self.run)
        except Exception as error:  # the report must never mask the run's own outcome
            _logger.exception("writing the rollout-chaos report failed")
            self.write_errors.append(f"report: could not write {self.report_path}: {error}")
        return self.written

    def summary(self, *, verbose: bool, compact: bool = False, paint: Paint | None = None) -> list[str]:
        """The section's lines, or none when no scenario ran and the run is not verbose; ``compact``
        (``-q``): the totals and one line per scenario, the run's notes and where files went."""
        if self.role == "worker" or (not self.records and not verbose):
            return []
        from pytest_rollout_chaos.report.summary import plain, summary_lines

        lines = summary_lines(
            self.records,
            extra_lines=[*self.run.environment, *self.run.notes],
            report_path=None if compact else self.written,
            compact=compact,
            paint=paint or plain,
        )
        if compact:
            lines += self.run.notes
            lines += [f"report: {self.written}"] if self.written is not None else []
        if self.json_written is not None:
            lines.append(f"json: {self.json_written}")
        lines += self.write_errors
        return lines


def _headline(report: pytest.TestReport) -> str:
    """The one-line reason pytest's short summary would give (its crash message), if any."""
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):  # (path, line, "Skipped: why")
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str) and message.strip():
        return message.strip().splitlines()[0]
    lines = [line for line in report.longreprtext.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _result(item: pytest.Item) -> Any:
    return item.stash.get(RESULT_KEY, None)
