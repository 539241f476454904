"""One scenario's section of the HTML report.

Where it is, its description and upstream references, pass or fail, the outcome line (a long one
folded into a ``<details>``), the problems the run had, the fault schedule, what each fault
touched, the witnesses seen, what an adapter ran of the trainer's code and stood in for, the
settings given to the trainer, the verdict table (invariant, status, summary, evidence), the
timeline picture with its legend and, where it did not pass, what pytest said. All text is
escaped: event data comes from the collector under test and its servers. The page around the
sections, and a section as a page of its own, are ``html``'s.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from html import escape
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters.trainer_settings import describe as describe_settings
from pytest_rollout_chaos.report import timeline as tl
from pytest_rollout_chaos.report.record import ResultFacts, ScenarioRecord
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


def render_section(position: int, record: ScenarioRecord) -> str:
    """``record``'s ``<section>``; ``position``, its place on the page, makes its ``anchor`` unique."""
    scenario = record.scenario
    result = record.result
    parts = [
        f'<section class="scenario {escape(record.outcome)}" id="{anchor(position, record)}">',
        f"<h2>{badge(record.outcome)} {escape(record.name)}</h2>",
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


def badge(outcome: str) -> str:
    """The outcome as one word on its colour (PASS, FAIL, ERROR, SKIP)."""
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


def anchor(position: int, record: ScenarioRecord) -> str:
    """The section's id, which the page's index links to."""
    return f"s{position}-" + re.sub(r"[^a-z0-9_-]+", "-", record.name.lower())
