"""Mutation score of the built-in catalog: how many small bugs in the reference collector it catches.

The mutants (``benchmarks/_mutants.py``) are made of the reference collector's own logic:
``collector/reference.py``, ``native.py`` and ``groups.py``, and the collector-side modules they
call (``failures``, ``prefix``, ``outage``, ``results``, ``readiness``). Left out: ``protocol``
(the contract's types, which the judge imports too) and ``gym_client`` (NeMo Gym's client, handed to
every collector: part of the system under test's surroundings, not of the collector).

Each mutant runs as a user runs the catalog: ``pytest --rollout-chaos <scenario files> -x`` in a
subprocess, with a copy of the package first on ``PYTHONPATH`` that holds the mutated file. A probe
plugin (``benchmarks/_mutation_probe.py``) proves in the child that the mutated module is the one
imported. The unmutated copy runs first, traced: it must pass, and it says which scenario runs
which lines. A mutant then runs only the scenarios that reach its lines (all that run collector
code, for a line run at import), earlier killers first, then the cheapest; a mutant no scenario
reaches survives without a run. Every run has a deadline: a mutant that hangs the run is killed
by timeout (counted as killed, and said so) and the child's process group is stopped.

Sampling: ``ROLLOUT_CHAOS_MUTATION_MAX`` mutants (default ``DEFAULT_MAX``, sized so the run fits in
30 minutes on two cores; 0 runs them all), drawn with ``ROLLOUT_CHAOS_MUTATION_SEED`` (default 0).
The score is killed / (killed + survived - equivalent), where the equivalent survivors are those
triaged so in ``mutation_survivors.md``; a survivor not triaged there is reported as untriaged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from benchmarks._mutants import Mutant, mutants_of
from benchmarks._result import Number, Result
from pytest_rollout_chaos.servers.process import stop_group
from pytest_rollout_chaos.servers.reaper_client import reaper

REPO: Final = Path(__file__).resolve().parent.parent
PACKAGE: Final = "pytest_rollout_chaos"
TARGETS: Final = tuple(
    f"{PACKAGE}/collector/{name}.py"
    for name in ("reference", "native", "groups", "failures", "prefix", "outage", "results", "readiness")
)
SURVIVORS: Final = Path(__file__).with_name("mutation_survivors.md")
MAX_ENV: Final = "ROLLOUT_CHAOS_MUTATION_MAX"
SEED_ENV: Final = "ROLLOUT_CHAOS_MUTATION_SEED"
DEFAULT_MAX: Final = 80
QUICK_MAX: Final = 6
BASELINE_TIMEOUT_S: Final = 900.0
DEADLINE_SLACK_S: Final = 60.0  # a mutant's deadline: this plus twice the baseline of what it runs
STOP_GRACE_S: Final = 15.0
PROBE: Final = Path(__file__).with_name("_mutation_probe.py")
PROBE_MODULE: Final = "_rollout_chaos_mutation_probe"  # its name in the child, beside the package copy
# The probe runs in the child alone, so it keeps its own copy of these three names.
PROBE_ENV: Final = "ROLLOUT_CHAOS_MUTATION_PROBE"
IMPORT_CONTEXT: Final = "<import>"
SESSION_CONTEXT: Final = "<session>"
VERDICTS: Final = ("equivalent", "not caught yet")
_TRIAGE_ROW = re.compile(r"^\|\s*`(?P<id>[^`]+)`\s*\|[^|]*\|\s*(?P<verdict>[^|]+?)\s*\|(?P<why>.*)\|\s*$")

Status = Literal["killed", "timeout", "survived", "not_compiled", "not_imported"]


@dataclass(slots=True)
class Outcome:
    """What became of one mutant."""

    mutant: Mutant
    status: Status
    scenarios: int = 0  # how many scenario files its run was given (0: none reaches it)
    seconds: float = 0.0
    killed_by: str | None = None
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.mutant.id,
            "description": self.mutant.description,
            "status": self.status,
            "scenarios": self.scenarios,
            "seconds": round(self.seconds, 1),
            "killed_by": self.killed_by,
            "why": self.why,
        }


@dataclass(slots=True)
class Baseline:
    """The unmutated run: its wall time, each scenario's own seconds, and the lines each one ran."""

    wall_s: float
    seconds: dict[str, float]  # scenario file -> setup + call + teardown
    lines: dict[str, dict[str, set[int]]]  # scenario file or a probe context -> target file -> lines
    runs_collector: list[str] = field(default_factory=list)  # scenario files that ran collector code
    skipped: set[str] = field(default_factory=set)  # scenario files that skipped (they cannot run here)

    def reaching(self, mutant: Mutant, file: str) -> list[str]:
        """The scenario files whose run reaches the mutant's lines (all that run collector code when
        the lines run at import), in catalog order."""
        wanted = set(range(mutant.lines[0], mutant.lines[1] + 1))
        for context in (IMPORT_CONTEXT, SESSION_CONTEXT):
            if wanted & self.lines.get(context, {}).get(file, set()):
                return list(self.runs_collector)
        return [
            scenario
            for scenario in self.runs_collector
            if wanted & self.lines.get(scenario, {}).get(file, set())
        ]

    def estimate_s(self, scenarios: list[str]) -> float:
        skipped = set(self.seconds) - set(scenarios)
        return self.wall_s - sum(self.seconds[scenario] for scenario in skipped)


def run(*, max_mutants: int | None = None, seed: int | None = None, ids: list[str] | None = None) -> Result:
    """Make the mutants, sample them, run each against the catalog, and score the catalog."""
    began = time.perf_counter()
    cap = int(os.environ.get(MAX_ENV, str(DEFAULT_MAX))) if max_mutants is None else max_mutants
    seed = int(os.environ.get(SEED_ENV, "0")) if seed is None else seed
    sources = {path: (REPO / path).read_text() for path in TARGETS}
    every: list[Mutant] = []
    unrendered: list[str] = []
    for path, source in sources.items():
        made = mutants_of(path, source)
        every += made.mutants
        unrendered += made.unrendered
    if ids:
        unknown = sorted(set(ids) - {mutant.id for mutant in every})
        if unknown:
            raise ValueError(f"no such mutants: {unknown}")
        chosen = [mutant for mutant in every if mutant.id in ids]
    elif cap and cap < len(every):
        picked = set(random.Random(seed).sample(range(len(every)), cap))
        chosen = [mutant for position, mutant in enumerate(every) if position in picked]
    else:
        chosen = list(every)
    _say(f"{len(every)} mutants of {len(TARGETS)} files; running {len(chosen)} (seed {seed})")
    with tempfile.TemporaryDirectory(prefix="bench-mutation-") as scratch:
        overlay = _make_overlay(Path(scratch))
        baseline = _baseline(overlay, Path(scratch))
        _say(
            f"baseline: {len(baseline.seconds)} scenarios passed in {baseline.wall_s:.0f} s, "
            f"{len(baseline.runs_collector)} run collector code"
        )
        unreached = [
            mutant.id for mutant in every if not baseline.reaching(mutant, str(overlay / mutant.path))
        ]
        outcomes = _run_all(chosen, sources, overlay, Path(scratch), baseline)
    tally = Tally(
        every=every,
        outcomes=outcomes,
        unrendered=unrendered,
        unreached=unreached,
        triage=read_triage(SURVIVORS),
        seed=seed,
        baseline_s=baseline.wall_s,
        wall_s=time.perf_counter() - began,
    )
    return tally.result()


def _run_all(
    chosen: list[Mutant], sources: dict[str, str], overlay: Path, scratch: Path, baseline: Baseline
) -> list[Outcome]:
    killers: Counter[str] = Counter()
    outcomes = []
    for number, mutant in enumerate(chosen, 1):
        outcome = _run_one(mutant, sources[mutant.path], overlay, scratch, baseline=baseline, killers=killers)
        if outcome.killed_by is not None:
            killers[outcome.killed_by] += 1
        outcomes.append(outcome)
        where = f" by {outcome.killed_by}" if outcome.killed_by else ""
        _say(f"[{number}/{len(chosen)}] {mutant.id} {outcome.status}{where} ({outcome.seconds:.0f} s)")
    return outcomes


def _run_one(
    mutant: Mutant, source: str, overlay: Path, scratch: Path, *, baseline: Baseline, killers: Counter[str]
) -> Outcome:
    began = time.perf_counter()
    text = mutant.apply(source)
    try:
        compile(text, mutant.path, "exec")
    except (SyntaxError, ValueError) as error:
        return Outcome(mutant, "not_compiled", why=str(error))
    scenarios = baseline.reaching(mutant, str(overlay / mutant.path))
    if not scenarios:
        return Outcome(mutant, "survived", why="no scenario runs these lines")
    scenarios.sort(key=lambda scenario: (-killers[scenario], baseline.seconds[scenario]))
    deadline_s = DEADLINE_SLACK_S + 2 * baseline.estimate_s(scenarios)
    target = overlay / mutant.path
    _write_module(target, text)
    try:
        child = _run_catalog(
            overlay, scratch, scenarios, modules=[_module_name(mutant.path)], deadline_s=deadline_s
        )
    finally:
        _write_module(target, source)
    outcome = Outcome(mutant, "survived", scenarios=len(scenarios), seconds=time.perf_counter() - began)
    imported = child.modules.get(_module_name(mutant.path))
    if child.error is not None or imported is None:
        outcome.status, outcome.why = "not_imported", child.error or child.tail
    elif imported != _sha256(text):
        raise RuntimeError(f"{mutant.id}: the child imported {mutant.path} but not the mutant's text")
    elif child.timed_out:
        outcome.status, outcome.killed_by = "timeout", child.running
        outcome.why = f"no end within {deadline_s:.0f} s (the run hung in {child.running})"
    elif child.failed is not None:
        outcome.status, outcome.killed_by, outcome.why = "killed", child.failed, child.failure
    elif child.exit_code != 0:
        outcome.status, outcome.why = "killed", f"pytest exit code {child.exit_code}: {child.tail}"
    elif skipped := sorted(child.skipped - baseline.skipped):
        # green for pytest, so it survives; but say so, the triage starts there
        outcome.why = f"skipped where the unmutated run passed: {', '.join(skipped)}"
    return outcome


@dataclass(slots=True)
class ChildRun:
    """One ``pytest --rollout-chaos`` child: how it ended, what it imported, which scenario failed."""

    exit_code: int | None
    timed_out: bool
    wall_s: float
    modules: dict[str, str]  # module -> sha256 of the file it was imported from
    error: str | None
    events: list[dict[str, Any]]
    tail: str

    @property
    def failed(self) -> str | None:
        """The scenario file of the first failed item (setup, call or teardown)."""
        failures = [event for event in self.events if event.get("outcome") == "failed"]
        return _file(failures[0]["nodeid"]) if failures else None

    @property
    def failure(self) -> str:
        return next((event["text"] for event in self.events if event.get("outcome") == "failed"), "")

    @property
    def skipped(self) -> set[str]:
        return {_file(event["nodeid"]) for event in self.events if event.get("outcome") == "skipped"}

    @property
    def running(self) -> str | None:
        started = [event["nodeid"] for event in self.events if event.get("event") == "start"]
        return _file(started[-1]) if started else None


def _run_catalog(
    overlay: Path,
    scratch: Path,
    scenarios: list[str],
    *,
    modules: list[str],
    deadline_s: float,
    trace: bool = False,
) -> ChildRun:
    report = scratch / "probe.json"
    for stale in scratch.glob("probe.json*"):
        stale.unlink()
    config = {
        "root": str(overlay),
        "modules": modules,
        "report": str(report),
        "trace": [str(overlay / path) for path in TARGETS] if trace else [],
    }
    (scratch / "probe-config.json").write_text(json.dumps(config))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPYCACHEPREFIX"}
    env["PYTHONPATH"] = os.pathsep.join([str(overlay), *filter(None, [os.environ.get("PYTHONPATH")])])
    env[PROBE_ENV] = str(scratch / "probe-config.json")
    command = [
        sys.executable, "-P", "-m", "pytest", "--rollout-chaos", "-p", "no:cacheprovider",
        "-p", PROBE_MODULE, "-x", "-q", "-rfE", f"--basetemp={scratch / 'tmp'}", *scenarios,
    ]  # fmt: skip
    began = time.perf_counter()
    log = scratch / "pytest.log"
    with log.open("w") as output:
        child = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        reaper().add(child.pid)
        timed_out = False
        try:
            child.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            stop_group(child, grace_s=STOP_GRACE_S)
            reaper().remove(child.pid)
    probed = json.loads(report.read_text()) if report.is_file() else {}
    events_file = Path(f"{report}.events")
    events = []
    if events_file.is_file():
        events = [json.loads(line) for line in events_file.read_text().splitlines()]
    lines = log.read_text(errors="replace").strip().splitlines()
    return ChildRun(
        exit_code=None if timed_out else child.returncode,
        timed_out=timed_out,
        wall_s=time.perf_counter() - began,
        modules={name: facts["sha256"] for name, facts in probed.get("modules", {}).items()},
        error=probed.get("error") if probed else "the probe never ran (the run ended before configure)",
        events=events,
        tail="\n".join(lines[-15:]),
    )


def _baseline(overlay: Path, scratch: Path) -> Baseline:
    """The unmutated catalog, traced; it must pass, or no mutant's run would mean anything."""
    catalog = sorted(str(path.relative_to(REPO)) for path in (REPO / "scenarios").glob("*.chaos.yaml"))
    modules = [_module_name(path) for path in TARGETS]
    child = _run_catalog(
        overlay, scratch, catalog, modules=modules, deadline_s=BASELINE_TIMEOUT_S, trace=True
    )
    if child.error is not None or child.timed_out or child.exit_code != 0:
        raise RuntimeError(
            f"the unmutated catalog did not pass (exit code {child.exit_code}, timed out: {child.timed_out}, "
            f"probe: {child.error}); no mutant can be judged:\n{child.tail}"
        )
    seconds: Counter[str] = Counter()
    for event in child.events:
        if "duration" in event:
            seconds[_file(event["nodeid"])] += event["duration"]
    traced = json.loads(Path(f"{scratch / 'probe.json'}.lines").read_text())
    lines: dict[str, dict[str, set[int]]] = {}
    for context, files in traced.items():
        merged = lines.setdefault(_file(context) if "::" in context else context, {})
        for file, numbers in files.items():
            merged.setdefault(file, set()).update(numbers)
    return Baseline(
        wall_s=child.wall_s,
        seconds={scenario: seconds[scenario] for scenario in catalog},
        lines=lines,
        runs_collector=[scenario for scenario in catalog if lines.get(scenario)],
        skipped=child.skipped,
    )


def read_triage(path: Path) -> dict[str, tuple[str, str]]:
    """``id -> (verdict, why)`` from the survivors file's tables (no file: nothing triaged)."""
    if not path.is_file():
        return {}
    triage = {}
    for line in path.read_text().splitlines():
        row = _TRIAGE_ROW.match(line)
        if row is not None and row["verdict"] in VERDICTS:
            triage[row["id"]] = (row["verdict"], row["why"].strip())
    return triage


@dataclass(frozen=True, slots=True)
class Tally:
    """A run's outcomes against the triage file: the counts, the score, and what to say about them."""

    every: list[Mutant]
    outcomes: list[Outcome]
    unrendered: list[str]
    unreached: list[str]  # every mutant (sampled or not) whose lines no scenario runs
    triage: dict[str, tuple[str, str]]
    seed: int
    baseline_s: float
    wall_s: float

    def result(self) -> Result:
        counts = Counter(outcome.status for outcome in self.outcomes)
        killed = counts["killed"] + counts["timeout"]
        survivors = [outcome.mutant.id for outcome in self.outcomes if outcome.status == "survived"]
        equivalent = [name for name in survivors if self.triage.get(name, ("",))[0] == "equivalent"]
        untriaged = [name for name in survivors if name not in self.triage]
        judged = killed + len(survivors) - len(equivalent)
        score = killed / judged if judged else float("nan")
        known = {mutant.id for mutant in self.every}
        stale = sorted(set(self.triage) - known)  # the code moved: its triage no longer names a mutant
        killed_now = [
            o.mutant.id
            for o in self.outcomes
            if o.status in ("killed", "timeout") and o.mutant.id in self.triage
        ]
        for outcome in self.outcomes:
            if outcome.status == "survived":
                verdict = self.triage.get(outcome.mutant.id, ("UNTRIAGED",))[0]
                _say(f"survived [{verdict}]: {outcome.mutant.id}: {outcome.mutant.description}")
        for name in stale:
            _say(f"triaged in {SURVIVORS.name} but no longer a mutant (the code moved): {name}")
        for name in killed_now:
            _say(f"triaged in {SURVIVORS.name} but killed now: {name}")
        _say(
            f"killed {killed} ({counts['timeout']} by timeout), survived {len(survivors)} "
            f"({len(equivalent)} equivalent, {len(untriaged)} untriaged), not compiled "
            f"{counts['not_compiled']}, not imported {counts['not_imported']}; score {100 * score:.1f}% "
            f"in {self.wall_s:.0f} s ({len(self.outcomes)} of {len(self.every)} mutants, seed {self.seed})"
        )
        numbers = (
            Number("mutants in total", len(self.every), ""),
            Number("mutants no scenario reaches (all)", len(self.unreached), ""),
            Number("mutants run", len(self.outcomes), ""),
            Number("killed", killed, ""),
            Number("of which by timeout", counts["timeout"], ""),
            Number("survived", len(survivors), ""),
            Number("equivalent (triaged)", len(equivalent), ""),
            Number("untriaged survivors", len(untriaged), ""),
            Number("not compiled", counts["not_compiled"], ""),
            Number("not imported", counts["not_imported"], ""),
            Number("score", 100 * score, "%"),
            Number("wall time", self.wall_s, "s", 1800, "at_most"),
        )
        details = {
            "seed": self.seed,
            "files": list(TARGETS),
            "baseline_s": round(self.baseline_s, 1),
            "per_file": dict(Counter(mutant.path for mutant in self.every)),
            "per_operator": dict(Counter(mutant.operator for mutant in self.every)),
            "unrendered": self.unrendered,
            "unreached": self.unreached,
            "untriaged": untriaged,
            "stale_triage": stale,
            "triaged_but_killed": killed_now,
            "mutants": [outcome.to_json() for outcome in self.outcomes],
        }
        return Result("mutation", numbers, details=details)


def _make_overlay(scratch: Path) -> Path:
    """A folder to put first on ``PYTHONPATH``: a copy of the package, the data folders it finds
    beside itself (``bundled``: ``fixtures/``, ``scenarios/``), and the probe plugin."""
    overlay = scratch / "overlay"
    shutil.copytree(REPO / PACKAGE, overlay / PACKAGE, symlinks=True)
    for data in ("fixtures", "scenarios"):
        (overlay / data).symlink_to(REPO / data)
    shutil.copyfile(PROBE, overlay / f"{PROBE_MODULE}.py")
    return overlay


def _write_module(path: Path, text: str) -> None:
    """Write a module's source and drop its bytecode, which could otherwise pass for the new text
    (a pyc is checked against the source's size and mtime in whole seconds)."""
    path.write_text(text)
    for cached in path.parent.glob(f"__pycache__/{path.stem}.*.pyc"):
        cached.unlink()


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _say(text: str) -> None:
    print(f"  mutation: {text}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    from benchmarks._result import table

    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutation", description=__doc__.split("\n")[0])
    parser.add_argument("--max-mutants", type=int, help=f"how many to sample (0: all; default {DEFAULT_MAX})")
    parser.add_argument("--seed", type=int, help="the sample's seed (default 0)")
    parser.add_argument("--id", dest="ids", action="append", help="run this mutant (repeatable)")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    result = run(max_mutants=args.max_mutants, seed=args.seed, ids=args.ids)
    print(table([result]))
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_json(), indent=2) + "\n")
