"""The lines of the ``rollout-chaos`` terminal-summary section (pure strings, no pytest).

Totals first (scenarios, faults, invariant verdicts, each invariant's own counts), then one
line per scenario with its time, so a slow or failing scenario stands out in CI logs, then,
when the collector is an adapter, each setting it gave the trainer. Compact (pytest's ``-q``):
the scenario totals and one line per scenario only. Each scenario's mark (``PASS``, ``FAIL``)
goes through ``paint``, which the terminal's writer gives its colour.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.report.record import ResultFacts, ScenarioRecord

STATUS_ORDER: Final = ("PASS", "FAIL", "UNKNOWN", "NOT_JUDGED")
STATUS_WORDS: Final = {"PASS": "passed", "FAIL": "failed", "UNKNOWN": "unknown", "NOT_JUDGED": "not judged"}
ALWAYS_SHOWN: Final = ("PASS", "FAIL", "UNKNOWN")
OUTCOME_CHARS: Final = 160  # a progress line stays readable; the failure story has the whole text
ITEM_MARKS: Final = {"passed": "PASS ", "failed": "FAIL ", "error": "ERROR", "skipped": "SKIP "}
# pytest's own colours for these outcomes (its short summary's)
ITEM_COLOURS: Final = {"passed": "green", "failed": "red", "error": "red", "skipped": "yellow"}
Paint = Callable[[str, str], str]
"""``paint(text, outcome)``: ``text`` as the terminal shows an item of that outcome."""


def plain(text: str, outcome: str) -> str:
    return text


def summary_lines(
    records: Sequence[ScenarioRecord],
    *,
    extra_lines: Sequence[str] = (),
    report_path: Path | None = None,
    compact: bool = False,
    paint: Paint = plain,
) -> list[str]:
    """Totals, per-invariant counts, one line per scenario, then ``extra_lines`` and the report
    path; ``compact``: the scenario totals, one line per scenario, then the report path."""
    lines: list[str] = []
    if records:
        lines.append(_scenario_totals(records))
        if not compact:
            lines.append(f"faults injected: {sum(record.faults_injected for record in records)}")
            lines += _invariant_lines(records)
            lines.append("per scenario:")
        width = max(len(record.name) for record in records)
        lines += [_scenario_line(record, width, paint) for record in records]
        if not compact:
            lines += settings_lines(records)
    else:
        lines.append("scenarios: none run")
    if not compact:
        lines += list(extra_lines)
    if report_path is not None:
        lines.append(f"report: {report_path}")
    return lines


def settings_lines(records: Sequence[ScenarioRecord]) -> list[str]:
    """Each setting an adapter gave its trainer, once, with the scenarios it was given in when not
    in every one that ran an adapter (where upstream sets each: the JSON results, the failure text)."""
    given: dict[str, list[str]] = {}
    ran = [record for record in records if record.result is not None and record.result.trainer_settings]
    for record in ran:
        for entry in record.result.trainer_settings if record.result is not None else ():
            facts = " ".join(str(entry[key]) for key in ("mode", "variant") if entry.get(key))
            for item in entry.get("settings") or ():
                line = f"{entry.get('trainer')} {facts}: {item['key']} = {item['value']!r} ({item['source']})"
                given.setdefault(line, []).append(record.name)
    if not given:
        return []
    lines = ["settings given to the trainer:"]
    for line, names in given.items():
        unique = sorted(set(names))
        lines.append(f"  {line}" + (f" [{', '.join(unique)}]" if len(unique) < len(ran) else ""))
    return lines


def progress_lines(record: ScenarioRecord) -> list[str]:
    """Indented lines under a scenario's ``-v`` status line: each fault event, then the outcome."""
    result = record.result
    if result is None:
        return []
    t0 = result.t0
    lines = []
    for event in record.events:
        if event.source == "fault" and event.op in ("inject", "heal", "restart"):
            what = event.data.get("fault") or event.data.get("server", "?")
            target = f" on {event.data['target']}" if "target" in event.data else ""
            failed = f" FAILED: {event.data['error']}" if "error" in event.data else ""
            lines.append(f"    t={event.t - t0:6.2f}s {event.op} {what}{target}{failed}")
        elif event.source == "process" and event.op == "exit":
            server, code = event.data.get("server", "?"), event.data.get("code")
            lines.append(f"    t={event.t - t0:6.2f}s {server} exited (code {code})")
    outcome = result.outcome
    if len(outcome) > OUTCOME_CHARS:
        outcome = outcome[: OUTCOME_CHARS - 1] + "…"
    lines.append(f"    outcome: {outcome} after {result.elapsed_s:.2f}s")
    return lines


def verdict_totals(records: Sequence[ScenarioRecord]) -> dict[str, Counter[str]]:
    """``{invariant name: Counter(PASS=.., FAIL=.., ...)}`` over every scenario with a result."""
    totals: dict[str, Counter[str]] = {}
    for record in records:
        if record.result is None:
            continue
        for verdict in record.result.verdicts:
            totals.setdefault(verdict.name, Counter())[verdict.status] += 1
    return totals


def _scenario_totals(records: Sequence[ScenarioRecord]) -> str:
    counts = Counter(record.outcome for record in records)
    parts = [f"{len(records)} run", f"{counts['passed']} passed", f"{counts['failed']} failed"]
    parts += [f"{counts[word]} {word}" for word in ("error", "skipped") if counts[word]]
    return "scenarios: " + ", ".join(parts)


def _invariant_lines(records: Sequence[ScenarioRecord]) -> list[str]:
    totals = verdict_totals(records)
    overall: Counter[str] = Counter()
    for counter in totals.values():
        overall.update(counter)
    lines = ["invariants: " + _counts_text(overall, always=True)]
    width = max((len(name) for name in totals), default=0)
    for name in sorted(totals):
        lines.append(f"  {name:<{width}}  {_counts_text(totals[name])}")
    return lines


def _counts_text(counter: Counter[str], *, always: bool = False) -> str:
    """``2 passed, 1 failed, 0 unknown``; with ``always``, those three even at 0 (not judged only
    when some were)."""
    return ", ".join(
        f"{counter[status]} {STATUS_WORDS[status]}"
        for status in STATUS_ORDER
        if counter[status] or (always and status in ALWAYS_SHOWN)
    )


def _scenario_line(record: ScenarioRecord, width: int, paint: Paint = plain) -> str:
    faults = record.faults_injected
    line = (
        f"  {paint(ITEM_MARKS[record.outcome], record.outcome)}  {record.name:<{width}}  "
        f"{record.elapsed_s:7.2f}s  "
        f"{faults} fault{'' if faults == 1 else 's'}"
    )
    if record.result is not None and record.result.earlier_draws:  # the runs before tested nothing
        line += f"  drawn {len(record.result.earlier_draws) + 1} times"
    if record.result is not None and (reason := why(record.result)):
        line += f"  {reason}"
    elif record.headline and record.outcome != "passed":
        line += f"  {record.headline[:100]}"
    return line


def why(result: ResultFacts) -> str:
    """What went wrong, most basic first: the harness's faults, then the invariants, then the rest."""
    if result.fault_errors:
        return f"fault error: {_first_line(result.fault_errors[0])}"
    if result.unfired:
        return f"fault never fired: {result.unfired[0]}"
    if result.unacted:
        return f"fault touched nothing: {result.unacted[0]}"
    bad = [f"{verdict.name} {verdict.status}" for verdict in result.not_passed()]
    if bad:
        return ", ".join(bad)
    if result.expectation_failures:
        return f"expectation: {result.expectation_failures[0]}"
    if result.vacuous:
        return f"vacuous: {result.vacuous[0]}"
    return ""


def _first_line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= OUTCOME_CHARS else first[: OUTCOME_CHARS - 1] + "…"
