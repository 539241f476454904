"""A pytest plugin for a mutant's run (``-p``): it proves the mutant is what runs, and traces lines.

The mutation benchmark copies this file beside the package copy it puts first on ``PYTHONPATH``
and names a JSON file in ``ROLLOUT_CHAOS_MUTATION_PROBE``: ``{"root": the copy's folder,
"modules": [modules to check], "report": path, "trace": [source files] }``. At configure time
each module is imported and its file, which must lie under ``root``, is hashed into ``report``;
a module that does not import ends the run (its error in ``report``). With ``trace``, every line
run in those files is recorded (the test item running then, or ``<import>`` before any item),
and written to ``report`` with ``.lines`` added when pytest ends. Each item's start and reports
go to ``report`` with ``.events`` added as they happen, so a run stopped at its deadline still
tells where it hung. This file imports nothing of
the package at import time, so the trace sees the modules' own import.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Generator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

PROBE_ENV = "ROLLOUT_CHAOS_MUTATION_PROBE"
IMPORT_CONTEXT = "<import>"
SESSION_CONTEXT = "<session>"
GIST_CHARS = 300

_config: dict[str, Any] = json.loads(Path(os.environ[PROBE_ENV]).read_text())
_lines: dict[str, dict[str, set[int]]] = {}
_current: dict[str, set[int]] = _lines.setdefault(IMPORT_CONTEXT, {})
_traced = frozenset(_config.get("trace") or ())

Tracer = Callable[[FrameType, str, Any], Any]


def _local(frame: FrameType, event: str, _arg: Any) -> Tracer:
    if event == "line":
        _current.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
    return _local


def _global(frame: FrameType, _event: str, _arg: Any) -> Tracer | None:
    return _local if frame.f_code.co_filename in _traced else None


if _traced:
    sys.settrace(_global)
    threading.settrace(_global)


def _context(name: str) -> None:
    global _current
    _current = _lines.setdefault(name, {})


def _event(**fields: object) -> None:
    with open(f"{_config['report']}.events", "a", encoding="utf-8") as events:
        events.write(json.dumps(fields) + "\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _event(event="start", nodeid=item.nodeid)
    _context(item.nodeid)
    try:
        return (yield)
    finally:
        _context(SESSION_CONTEXT)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    text = _gist(report.longreprtext) if report.failed else ""
    _event(
        nodeid=report.nodeid, when=report.when, outcome=report.outcome, duration=report.duration, text=text
    )


def _gist(text: str) -> str:
    """The error a failure report names: the line after ``InvariantViolation:`` (a scenario's
    story), else the last ``E`` line of a traceback, else the first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for position, line in enumerate(lines[:-1]):
        if re.fullmatch(r"\w+:", line):
            return f"{line} {lines[position + 1]}"[:GIST_CHARS]
    errors = [line for line in lines if line.startswith("E ")]
    return (errors[-1] if errors else lines[0] if lines else "")[:GIST_CHARS]


def pytest_configure(config: pytest.Config) -> None:
    report: dict[str, Any] = {"modules": {}}
    root = Path(_config["root"]).resolve()
    for name in _config["modules"]:
        try:
            module = importlib.import_module(name)
        except Exception as error:  # the mutant's module-level code may raise anything
            report["error"] = "".join(traceback.format_exception_only(type(error), error)).strip()
            break
        path = Path(str(module.__file__)).resolve()
        if not path.is_relative_to(root):
            report["error"] = f"{name} was imported from {path}, not from under {root}"
            break
        report["modules"][name] = {"file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    Path(_config["report"]).write_text(json.dumps(report))
    if "error" in report:
        pytest.exit(f"mutation probe: {report['error']}", returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _traced:
        return
    sys.settrace(None)
    threading.settrace(None)
    lines = {
        context: {file: sorted(numbers) for file, numbers in files.items()}
        for context, files in _lines.items()
        if files
    }
    Path(_config["report"] + ".lines").write_text(json.dumps(lines))
