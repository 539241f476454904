"""``rollout-chaos run``: scenarios on the real stack without pytest (Chaos Toolkit's ``chaos run``).

The same engine as ``pytest --rollout-chaos``: each scenario goes through the fit step, the run and
the judges (``engine.run``), on one stack built by the same builder (``builder.StackBuilder``),
started only when a scenario first needs it and stopped on every path (Ctrl-C and SIGTERM too).
Progress goes to stderr as it happens: the keeper's line per server as it is ready, then one line
per scenario with its outcome. The summary is the plugin's (``report.summary``), the ``--json``
document its schema's.

Exit status: 0 when every scenario passed or could not run here (a skip, said why), 1 when one
failed, 2 for bad usage (a bad option, scenario file or target), each said on one line.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Final, TextIO

import pytest

from pytest_rollout_chaos import bundled, preflight, targets
from pytest_rollout_chaos.builder import StackBuilder, replicas_to_start
from pytest_rollout_chaos.collector.target import load_factory
from pytest_rollout_chaos.engine import run, story
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.errors import (
    NOT_JUDGED_PREFIX,
    CannotRunHere,
    ChaosError,
    CollectorTargetError,
    InvariantViolation,
    NotJudgedError,
)
from pytest_rollout_chaos.report.json_report import write_json
from pytest_rollout_chaos.report.record import ItemOutcome, ResultFacts, ScenarioFacts, ScenarioRecord
from pytest_rollout_chaos.report.run_info import run_facts
from pytest_rollout_chaos.report.summary import summary_lines
from pytest_rollout_chaos.scenario.model import Scenario, ScenarioFileError, load_scenario, scenario_files
from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.settings import BACKENDS, GYM_BACKENDS, ChaosSettings

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
DESCRIPTION: Final = (
    "Run scenarios on the real stack without pytest: the same engine, verdicts and JSON document "
    "as pytest --rollout-chaos (default: the built-in catalog)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="SCENARIO",
        help="Files, or folders to search (default: the catalog)",
    )
    parser.add_argument(
        "--target",
        default=targets.REFERENCE,
        help=f"The collector under test: {targets.valid_targets()} (default: {targets.REFERENCE})",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the policy and the faults (default: 0)")
    parser.add_argument("--backend", choices=BACKENDS, default="tiny", help="Policy engine (default: tiny)")
    parser.add_argument(
        "--gym", choices=GYM_BACKENDS, default="embedded", help="Gym servers (default: embedded)"
    )
    parser.add_argument("--toxiproxy", default="auto", help="auto, embedded, binary, docker, or an API URL")
    parser.add_argument("--json", type=Path, metavar="PATH", help="Write the JSON results document here")
    parser.add_argument(
        "--log-dir", type=Path, metavar="DIR", help="Server logs here (default: a new temp folder)"
    )


def run_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Load every scenario first (a bad file is one usage error naming it), then run them in order."""
    settings = ChaosSettings(
        enabled=True,
        target=args.target,
        seed=args.seed,
        backend=args.backend,
        gym=args.gym,
        toxiproxy=args.toxiproxy,
    )
    if str(Path.cwd()) not in sys.path:  # a MODULE:FACTORY target imports from here, as under python -m
        sys.path.insert(0, str(Path.cwd()))
    try:
        scenarios = _load([*args.paths] or [bundled.catalog_dir()])
        preflight.check(settings)
        load_factory(settings.target)
    except CollectorTargetError as error:
        print(f"rollout-chaos run: --target: {error}", file=err)
        return EXIT_USAGE
    except (ScenarioFileError, pytest.UsageError, FileNotFoundError) as error:
        print(f"rollout-chaos run: {error}", file=err)
        return EXIT_USAGE
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="rollout-chaos-run-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # so the servers stop on SIGTERM too
    try:
        with ProcessKeeper(log_dir, tell=lambda line: print(line, file=err, flush=True)) as keeper:
            builder = StackBuilder(settings, keeper, replicas=replicas_to_start(settings, scenarios))
            records = []
            for index, scenario in enumerate(scenarios, start=1):
                record = _run_one(scenario, builder, settings)
                print(
                    f"[{index}/{len(scenarios)}] {scenario.name} {record.outcome.upper()}",
                    file=err,
                    flush=True,
                )
                records.append(record)
            lines = summary_lines(records, extra_lines=[*keeper.summary_lines, f"logs: {log_dir}"])
    finally:
        signal.signal(signal.SIGTERM, previous)
    for line in lines:
        print(line, file=out)
    for record in records:
        if record.outcome in ("failed", "error"):
            print(f"\n--- {record.name} ({record.outcome})\n{record.message}", file=out)
    if args.json is not None:
        info = run_facts(settings, command=["rollout-chaos", *sys.argv[1:]])
        info.add_environment(keeper.summary_lines)
        print(f"json: {write_json(args.json, records, run=info)}", file=out)
    return EXIT_FAILED if any(record.outcome in ("failed", "error") for record in records) else EXIT_OK


def _run_one(scenario: Scenario, builder: StackBuilder, settings: ChaosSettings) -> ScenarioRecord:
    """One scenario as pytest's item runs it (``scenario_items.run_scenario``), kept as a record."""
    began = time.monotonic()
    result: ScenarioResult | None = None
    outcome: ItemOutcome = "passed"
    message = ""
    try:
        loaded = run.collector_for(scenario, settings.target)
        result = run.run_on(scenario, builder.stack, loaded, settings)
        story.raise_for(result)
    except CollectorTargetError as error:  # a declaration of the wrong shape, say
        outcome, message = "error", f"{type(error).__name__}: {error}"
    except CannotRunHere as reason:
        outcome, message = "skipped", str(reason)
    except NotJudgedError as declined:
        outcome, message = "skipped", NOT_JUDGED_PREFIX + str(declined)
    except (InvariantViolation, ChaosError) as error:
        outcome, message = "failed", f"{type(error).__name__}: {error}"
    return ScenarioRecord(
        nodeid=f"{scenario.path}::{scenario.name}",
        name=scenario.name,
        outcome=outcome,
        duration_s=time.monotonic() - began,
        scenario=ScenarioFacts.of(scenario),
        result=ResultFacts.of(result) if result is not None else None,
        message=message,
        headline=message.splitlines()[0] if message else "",
        events=tuple(result.history.events()) if result is not None else (),
    )


def _load(paths: Sequence[Path]) -> list[Scenario]:
    """Every scenario file the paths name, loaded; every problem of every file at once."""
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file or folder")
    problems: list[ScenarioFileError] = []
    scenarios = []
    for file in scenario_files(paths):
        try:
            scenarios.append(load_scenario(file))
        except ScenarioFileError as error:
            problems.append(error)
    if problems:
        raise ScenarioFileError(tuple(problem for error in problems for problem in error.problems))
    return scenarios


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"received signal {signum}")
