"""The HTML report: one self-contained page (inline CSS and SVG, no script, no external asset).

``render_report(records, run=...)`` returns the page; ``write_report(path, records, run=...)``
writes it. At the top: which run it is (target, seed, backends, Toxiproxy, versions, command
line), the totals, a "failing only" switch (CSS, no script), the index and each server's log;
then a section per scenario (``scenario_section``). All text is escaped: event data comes from
the collector under test and its servers.
``embedded(record)`` is one scenario's section as a frame of its own (its own page, so its
stylesheet touches nothing around it), for pytest-html's report.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from html import escape
from pathlib import Path

from pytest_rollout_chaos.report.record import ScenarioRecord
from pytest_rollout_chaos.report.run_info import TOXIPROXY_LINE, RunInfo, log_href
from pytest_rollout_chaos.report.scenario_section import anchor, badge, render_section
from pytest_rollout_chaos.report.style import CSS
from pytest_rollout_chaos.report.summary import verdict_totals, why


def write_report(
    path: Path,
    records: Sequence[ScenarioRecord],
    *,
    run: RunInfo | None = None,
    title: str = "rollout-chaos report",
) -> Path:
    """Write the page to ``path`` (creating its folder) and return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(records, run=run, title=title, path=path), encoding="utf-8")
    return path


def render_report(
    records: Sequence[ScenarioRecord],
    *,
    run: RunInfo | None = None,
    title: str = "rollout-chaos report",
    path: Path | None = None,
) -> str:
    """The whole page as a string (``path``: where it will be written, for relative log links)."""
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    failing = sum(record.outcome in ("failed", "error") for record in records)
    body = [
        '<header class="page">',
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">generated {escape(generated)}</p>',
        _run_facts(run) if run is not None else "",
        _totals(records),
        "</header>",
        _filter(failing) if records else "",
        _index(records),
        *(render_section(position, record) for position, record in enumerate(records)),
        _logs(run, path) if run is not None else "",
    ]
    if not records:
        body.append('<p class="empty">No scenario ran.</p>')
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title>",
            f"<style>{CSS}</style>",
            "</head><body>",
            *(part for part in body if part),
            "</body></html>",
        ]
    )


def embedded(record: ScenarioRecord) -> str:
    """One scenario's section (outcome, problems, schedule, verdicts, timeline, the failure's text)
    as an ``<iframe>`` whose page carries its own stylesheet, for another report to show."""
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><style>{CSS}</style></head>'
        f'<body style="padding: 8px">{render_section(0, record)}</body></html>'
    )
    title = escape(f"rollout-chaos: {record.name}", quote=True)
    return (
        f'<iframe title="{title}" srcdoc="{escape(page, quote=True)}" '
        'style="width: 100%; height: 640px; border: 1px solid #e5e7eb; resize: vertical"></iframe>'
    )


def _run_facts(run: RunInfo) -> str:
    """Which run this page is about, as a two-column list."""
    facts = [
        ("target", f"<code>{escape(run.target)}</code>"),
        ("seed", escape(str(run.seed))),
        ("policy", f"{escape(run.backend)} serving <code>{escape(run.model)}</code>"),
        ("agents", escape(run.gym)),
        ("Gym client", escape(run.gym_client)),
        ("toxiproxy", "<br>".join(escape(line) for line in run.toxiproxy.split("; "))),
        ("versions", escape(", ".join(f"{name} {version}" for name, version in run.versions.items()))),
        ("command", f"<code>{escape(run.command)}</code>"),
        ("started", escape(run.started)),
    ]
    if run.workers:
        facts.append(("xdist workers", escape(", ".join(sorted(run.workers)))))
    others = [line for line in run.environment if TOXIPROXY_LINE not in line]
    if others:
        facts.append(("backends", "<br>".join(escape(line) for line in others)))
    if run.notes:
        facts.append(("notes", "<br>".join(f'<span class="bad">{escape(note)}</span>' for note in run.notes)))
    rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    return f'<dl class="run">{rows}</dl>'


def _filter(failing: int) -> str:
    """A checkbox that hides passing and skipped scenarios, by CSS alone (``:has``)."""
    return (
        '<p class="filter"><label><input type="checkbox" id="only-failing"> '
        f"show only failing scenarios ({failing})</label></p>"
    )


def _logs(run: RunInfo, path: Path | None) -> str:
    if not run.logs:
        return ""
    items = [
        f'<li><a href="{escape(log_href(log, path), quote=True)}">'
        f"{escape(f'{log.worker}: ' if log.worker else '')}{escape(log.name)}</a> "
        f'<code class="muted">{escape(log.path)}</code></li>'
        for log in sorted(run.logs, key=lambda log: (log.worker, log.name))
    ]
    return '<section class="logs"><h2>Server logs</h2><ul>' + "".join(items) + "</ul></section>"


def _totals(records: Sequence[ScenarioRecord]) -> str:
    passed = sum(record.outcome == "passed" for record in records)
    failed = sum(record.outcome in ("failed", "error") for record in records)
    skipped = sum(record.outcome == "skipped" for record in records)
    fault_errors = sum(bool(record.result and record.result.fault_errors) for record in records)
    faults = sum(record.faults_injected for record in records)
    verdicts = {"PASS": 0, "FAIL": 0, "UNKNOWN": 0, "NOT_JUDGED": 0}
    for counter in verdict_totals(records).values():
        for status, count in counter.items():
            verdicts[status] = verdicts.get(status, 0) + count
    cards = [
        ("scenarios", str(len(records)), ""),
        ("passed", str(passed), "good" if passed else ""),
        ("failed", str(failed), "bad" if failed else ""),
        *([("skipped", str(skipped), "")] if skipped else []),
        ("faults injected", str(faults), ""),
        *([("fault errors", str(fault_errors), "bad")] if fault_errors else []),
        ("invariants passed", str(verdicts["PASS"]), "good" if verdicts["PASS"] else ""),
        ("invariants failed", str(verdicts["FAIL"]), "bad" if verdicts["FAIL"] else ""),
        ("invariants unknown", str(verdicts["UNKNOWN"]), "warn" if verdicts["UNKNOWN"] else ""),
        ("invariants not judged", str(verdicts["NOT_JUDGED"]), ""),
    ]
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card {tone}"><div class="num">{escape(value)}</div>'
            f'<div class="what">{escape(label)}</div></div>'
            for label, value, tone in cards
        )
        + "</div>"
    )


def _index(records: Sequence[ScenarioRecord]) -> str:
    if not records:
        return ""
    rows = []
    for position, record in enumerate(records):
        verdicts = record.result.verdicts if record.result is not None else ()
        chips = "".join(
            f'<span class="chip {verdict.status.lower()}" title="{escape(verdict.summary)}">'
            f"{escape(verdict.name)}</span>"
            for verdict in verdicts
        )
        link = f'<a href="#{anchor(position, record)}">'
        rows.append(
            f'<tr class="{escape(record.outcome)}"><td>{badge(record.outcome)}</td><td>{link}'
            f'{escape(record.name)}</a></td><td class="num">{record.elapsed_s:.2f}s</td>'
            f'<td class="num">{record.faults_injected}</td><td>{chips}{_why(record)}</td></tr>'
        )
    return (
        '<table class="index"><thead><tr><th>result</th><th>scenario</th><th>time</th><th>faults</th>'
        "<th>invariants</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _why(record: ScenarioRecord) -> str:
    """Under the chips of a scenario that did not pass: the one line that says why."""
    result = record.result
    if record.outcome == "passed":
        return ""
    if (
        result is not None
        and result.not_passed()
        and not (result.fault_errors or result.unfired or result.unacted)
    ):
        return ""  # the red chips say it already
    text = why(result) if result is not None else record.headline
    return f'<div class="why">{escape(text)}</div>' if text else ""
