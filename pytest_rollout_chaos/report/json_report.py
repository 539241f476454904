"""The results document of ``--rollout-chaos-json``: one JSON document per run, for programs.

A CI step, a dashboard or a gate reads it instead of scraping the terminal or the HTML page. It
is built from the same ``ScenarioRecord``s and ``RunInfo`` as the HTML report, so under
pytest-xdist the controller writes one document that covers every worker's scenarios. Its shape
is ``json_schema.json`` beside this module (JSON Schema draft 2020-12, ``json_schema()``).
``FORMAT_VERSION`` goes up when a field changes meaning or goes away; fields may be added
without it, so readers ignore fields they do not know.
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.report.record import ResultFacts, ScenarioRecord
from pytest_rollout_chaos.report.run_info import RunInfo

FORMAT: Final = "pytest-rollout-chaos results"
FORMAT_VERSION: Final = 1
SCHEMA_PATH: Final = Path(__file__).with_name("json_schema.json")
ITEM_OUTCOMES: Final = ("passed", "failed", "error", "skipped")
STATUSES: Final = ("PASS", "FAIL", "UNKNOWN", "NOT_JUDGED")


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that every document ``render_json`` returns validates against."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def write_json(path: Path, records: Sequence[ScenarioRecord], *, run: RunInfo) -> Path:
    """Write the document to ``path`` (creating its folder) and return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(render_json(records, run=run), indent=2) + "\n", encoding="utf-8")
    return path


def render_json(records: Sequence[ScenarioRecord], *, run: RunInfo) -> dict[str, Any]:
    """The document: what it is, the run, the totals, then one entry per scenario."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "generated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "run": _run(run),
        "totals": _totals(records),
        "scenarios": [_scenario(record) for record in records],
    }


def _run(run: RunInfo) -> dict[str, Any]:
    return {
        "settings": {
            "target": run.target,
            "seed": run.seed,
            "backend": run.backend,
            "model": run.model,
            "gym": run.gym,
            "toxiproxy": run.toxiproxy_mode,
        },
        "gym_client": run.gym_client,
        "versions": dict(run.versions),
        "command": run.command,
        "started": run.started,
        "toxiproxy": run.toxiproxy,
        "environment": list(run.environment),
        "workers": sorted(run.workers),
        "notes": list(run.notes),
        "logs": [asdict(log) for log in run.logs],
    }


def _totals(records: Sequence[ScenarioRecord]) -> dict[str, Any]:
    outcomes = Counter(record.outcome for record in records)
    statuses = Counter(
        verdict.status for record in records for verdict in (record.result.verdicts if record.result else ())
    )
    return {
        "scenarios": len(records),
        **{outcome: outcomes[outcome] for outcome in ITEM_OUTCOMES},
        "faults_injected": sum(record.faults_injected for record in records),
        "verdicts": {status: statuses[status] for status in STATUSES},
    }


def _scenario(record: ScenarioRecord) -> dict[str, Any]:
    facts = record.scenario
    return {
        "name": record.name,
        "nodeid": record.nodeid,
        "outcome": record.outcome,
        "headline": record.headline,
        "message": record.message,
        "worker": record.worker,
        "file": None if facts is None else {"path": facts.path, "line": facts.line},
        "description": "" if facts is None else facts.description,
        "tags": [] if facts is None else list(facts.tags),
        "upstream": [] if facts is None else list(facts.upstream),
        "fault_steps": [] if facts is None else list(facts.fault_steps),
        "timings": {
            "setup_s": record.setup_s,
            "call_s": record.call_s,
            "elapsed_s": None if record.result is None else record.result.elapsed_s,
            "within_s": None if facts is None else facts.within_s,
        },
        "result": None if record.result is None else _result(record.result),
    }


def _result(result: ResultFacts) -> dict[str, Any]:
    fates = Counter(result.row_outcomes.values())
    return {
        "outcome": result.outcome,
        "passed": result.passed,
        "rows": len(result.rows),
        "row_outcomes": dict(sorted(fates.items())),
        "faults_injected": result.faults_injected,
        "verdicts": [
            {"name": v.name, "status": v.status, "summary": v.summary, "evidence": list(v.evidence)}
            for v in result.verdicts
        ],
        "faults": [asdict(fault) for fault in result.faults],
        "expectation_failures": list(result.expectation_failures),
        "fault_errors": list(result.fault_errors),
        "unfired": list(result.unfired),
        "unacted": list(result.unacted),
        "witnesses": list(result.witnesses),
        "vacuous": list(result.vacuous),
        "earlier_draws": list(result.earlier_draws),
        "trainer_settings": [dict(entry) for entry in result.trainer_settings],
        "upstream_run": dict(result.upstream_run),
        "follow_ups": [asdict(follow_up) for follow_up in result.follow_ups],
    }
