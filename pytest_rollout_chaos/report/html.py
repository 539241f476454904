"""The HTML report: one self-contained page (inline CSS and SVG, no script, no external asset).

``render_report(records, run=...)`` returns the page; ``write_report(path, records, run=...)``
writes it. At the top: which run it is (target, seed, backends, Toxiproxy, versions, command
line), the totals, a "failing only" switch (CSS, no script), the index and each server's log.
Per scenario: name, description, upstream references, pass or fail, the outcome line, the
fault schedule, what an adapter ran of the trainer's code and stood in for, the verdict table
(invariant, status, summary, evidence) and the timeline picture. All text is escaped: event
data comes from the collector under test and its servers.
``embedded(record)`` is one scenario's section as a frame of its own (its own page, so its
stylesheet touches nothing around it), for pytest-html's report.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters.trainer_settings import describe as describe_settings
from pytest_rollout_chaos.report import timeline as tl
from pytest_rollout_chaos.report.record import ResultFacts, ScenarioRecord
from pytest_rollout_chaos.report.run_info import TOXIPROXY_LINE, RunInfo, log_href
from pytest_rollout_chaos.report.style import CSS
from pytest_rollout_chaos.report.summary import verdict_totals, why
from pytest_rollout_chaos.report.svg import render_timeline

EVIDENCE_LIMIT: Final = 40
OUTCOME_CHARS: Final = 300  # longer outcomes (chained server errors) fold into a <details>
UPSTREAM_REF: Final = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)#(?P<number>\d+)$")
OUTCOME_LEGEND: Final = ("completed", "truncated", "aborted", "missing", "raised", "timed out")
FAMILY_LEGEND: Final = (
    ("network", "network fault"),
    ("process", "process fault"),
    ("semantic", "semantic fault"),
)


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
        *(_scenario_section(position, record) for position, record in enumerate(records)),
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
        f'<body style="padding: 8px">{_scenario_section(0, record)}</body></html>'
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
        link = f'<a href="#{_anchor(position, record)}">'
        rows.append(
            f'<tr class="{escape(record.outcome)}"><td>{_badge(record.outcome)}</td><td>{link}'
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


def _scenario_section(position: int, record: ScenarioRecord) -> str:
    scenario = record.scenario
    result = record.result
    parts = [
        f'<section class="scenario {escape(record.outcome)}" id="{_anchor(position, record)}">',
        f"<h2>{_badge(record.outcome)} {escape(record.name)}</h2>",
    ]
    if scenario is not None:
        where = f"{scenario.path}:{scenario.line}" + (f" · {record.worker}" if record.worker else "")
        parts.append(f'<p class="where">{escape(where)}')
        if scenario.tags:
            parts.append("".join(f' <span class="tag">{escape(tag)}</span>' for tag in scenario.tags))
        parts.append("</p>")
        parts.append(f'<p class="description">{escape(scenario.description)}</p>')
        if scenario.upstream:
            parts.append(
                '<p class="upstream">upstream: ' + ", ".join(map(_upstream, scenario.upstream)) + "</p>"
            )
    if result is not None:
        outcome = result.outcome
        shown = outcome if len(outcome) <= OUTCOME_CHARS else outcome[: OUTCOME_CHARS - 1] + "…"
        parts.append(
            f'<p class="outcome"><b>outcome:</b> {escape(shown)} '
            f'<span class="muted">after {result.elapsed_s:.2f}s, {result.faults_injected} fault(s) injected'
            f"{_deadline_text(record)}</span></p>"
        )
        if shown != outcome:
            parts.append(
                '<details class="message"><summary>the whole outcome</summary>'
                f"<pre>{escape(outcome)}</pre></details>"
            )
        parts += _problems(result)
    if scenario is not None and scenario.fault_steps:
        parts.append('<div class="schedule"><b>fault schedule</b><ol>')
        parts += [f"<li><code>{escape(step)}</code></li>" for step in scenario.fault_steps]
        parts.append("</ol></div>")
    if result is not None and result.touches:
        parts.append('<div class="schedule"><b>what each fault touched</b><ul>')
        parts += [f"<li><code>{escape(touch)}</code></li>" for touch in result.touches]
        parts.append("</ul></div>")
    if result is not None and result.witnesses:
        parts.append('<div class="schedule"><b>witnesses</b><ul>')
        parts += [f"<li><code>{escape(sighting)}</code></li>" for sighting in result.witnesses]
        parts.append("</ul></div>")
    if result is not None and result.upstream_run:
        parts += _upstream_run(result.upstream_run)
    for entry in result.trainer_settings if result is not None else ():
        trainer = escape(str(entry.get("trainer")))
        parts.append(f'<details class="schedule"><summary>settings given to {trainer}</summary><ul>')
        parts += [f"<li><code>{escape(line)}</code></li>" for line in describe_settings(entry)]
        parts.append("</ul></details>")
    if result is not None:
        parts.append(_verdict_table(result))
        parts.append(_picture(record))
    if record.message and (result is None or record.outcome != "passed"):
        parts.append(
            f'<details class="message"{" open" if result is None else ""}><summary>pytest says</summary>'
            f"<pre>{escape(record.message)}</pre></details>"
        )
    parts.append("</section>")
    return "\n".join(parts)


def _upstream_run(run: Mapping[str, Any]) -> list[str]:
    """The Upstream section: where the Rollouts were read, each call that ran for real with its
    outcome (repeats counted), the Gym client, and every stand-in once."""
    parts = ['<div class="schedule"><b>Upstream</b>']
    if run.get("read_out"):
        parts.append(f"<p>read out at: <code>{escape(str(run['read_out']))}</code></p>")
    ran: Counter[tuple[str, str, str]] = Counter(
        (str(call["call"]), str(call["outcome"]), str(call.get("error") or ""))
        for call in run.get("calls", ())
    )
    parts.append("<p>ran for real:</p><ol>")
    for (call, outcome, error), times in ran.items():
        status = {"ok": "pass", "fail": "fail"}.get(outcome, "unknown")
        repeat = f" ({times} times)" if times > 1 else ""
        said = f' <span class="muted">{escape(error)}</span>' if error else ""
        shown = f'<span class="status {status}">{escape(outcome)}</span> <code>{escape(call)}</code>'
        parts.append(f"<li>{shown}{repeat}{said}</li>")
    parts.append("</ol>")
    parts += [f"<p>Gym client: {escape(str(client))}</p>" for client in run.get("gym_clients", ())]
    stood_in = list(run.get("stood_in", ()))
    if stood_in:
        parts.append(f"<details><summary>stood in for ({len(stood_in)})</summary><ul>")
        parts += [f"<li>{escape(str(line))}</li>" for line in stood_in]
        parts.append("</ul></details>")
    parts.append("</div>")
    return parts


def _problems(result: ResultFacts) -> list[str]:
    """One list per kind of problem the run had, in the order a reader fixes them."""
    kinds = (
        ("fault errors", result.fault_errors, False, "problems"),
        ("expected", result.expectation_failures, False, "problems"),
        ("fault steps that never fired", result.unfired, True, "problems"),
        ("faults that did not act", result.unacted, False, "problems"),
        # what found nothing to judge is a gap in the test, not a bug found: grey, not red
        ("not judged (the scenario tested nothing there)", result.vacuous, False, "problems untested"),
    )
    parts = []
    for title, items, code, kind in kinds:
        if not items:
            continue
        parts.append(f'<div class="{kind}"><b>{escape(title)}:</b><ul>')
        parts += [
            f"<li><code>{escape(item)}</code></li>" if code else f"<li>{escape(item)}</li>" for item in items
        ]
        parts.append("</ul></div>")
    return parts


def _verdict_table(result: ResultFacts) -> str:
    """Invariant, status and summary per row; evidence in a full-width row under its verdict."""
    if not result.verdicts:
        return '<p class="muted">No invariant was judged.</p>'
    rows = []
    for verdict in result.verdicts:
        status = verdict.status.lower()
        rows.append(
            f'<tr class="{status}"><td><code>{escape(verdict.name)}</code></td>'
            f'<td><span class="status {status}">{escape(verdict.status)}</span></td>'
            f"<td>{escape(verdict.summary)}</td></tr>"
        )
        if verdict.evidence:
            shown = list(verdict.evidence[:EVIDENCE_LIMIT])
            if len(verdict.evidence) > EVIDENCE_LIMIT:
                shown.append(f"... {len(verdict.evidence) - EVIDENCE_LIMIT} more")
            opened = " open" if verdict.status in ("FAIL", "UNKNOWN") else ""
            rows.append(
                f'<tr class="evidence {status}"><td></td><td colspan="2"><details{opened}>'
                f"<summary>evidence ({len(verdict.evidence)} lines)</summary>"
                f"<pre>{escape(chr(10).join(shown))}</pre></details></td></tr>"
            )
    return (
        '<table class="verdicts"><thead><tr><th>invariant</th><th>status</th><th>summary</th>'
        "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _picture(record: ScenarioRecord) -> str:
    result = record.result
    if result is None:
        return ""
    timeline = tl.build_timeline(
        record.events,
        t0=result.t0,
        rows=result.rows,
        outcomes=result.row_outcomes,
        elapsed_s=result.elapsed_s,
        deadline_s=result.deadline_s,
    )
    return (
        '<figure class="picture">'
        + render_timeline(timeline, title=f"timeline of {record.name}")
        + f"<figcaption>{_legend()}</figcaption></figure>"
    )


def _legend() -> str:
    outcomes = "".join(
        f'<span class="key"><i class="swatch {name.replace(" ", "-")}"></i>{escape(name)}</span>'
        for name in OUTCOME_LEGEND
    )
    families = "".join(
        f'<span class="key"><i class="swatch band-{name}"></i>{escape(label)}</span>'
        for name, label in FAMILY_LEGEND
    )
    marks = (
        '<span class="key"><i class="glyph retry">◯</i>retry</span>'
        '<span class="key"><i class="glyph fail">✕</i>attempt failed</span>'
        '<span class="key"><i class="glyph exit">▼</i>process exit</span>'
        '<span class="key"><i class="glyph tick">╷</i>server request</span>'
        '<span class="key"><i class="glyph effect">◆</i>fault effect in a server</span>'
        '<span class="key"><i class="glyph end">┆</i>collection ended</span>'
    )
    return f'<div class="legend">{outcomes}{families}{marks}</div>'


def _badge(outcome: str) -> str:
    word = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}.get(outcome, outcome)
    return f'<span class="badge {escape(outcome)}">{escape(word)}</span>'


def _upstream(reference: str) -> str:
    match = UPSTREAM_REF.match(reference)
    if match is None:
        if reference.startswith(("https://", "http://")):
            return f'<a href="{escape(reference, quote=True)}">{escape(reference)}</a>'
        return f"<code>{escape(reference)}</code>"
    url = f"https://github.com/{match['repo']}/issues/{match['number']}"
    return f'<a href="{escape(url, quote=True)}">{escape(reference)}</a>'


def _deadline_text(record: ScenarioRecord) -> str:
    if record.scenario is None:
        return ""
    return f", deadline {record.scenario.within_s:g}s"


def _anchor(position: int, record: ScenarioRecord) -> str:
    return f"s{position}-" + re.sub(r"[^a-z0-9_-]+", "-", record.name.lower())
