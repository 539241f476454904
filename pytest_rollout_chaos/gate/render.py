"""The gate's outputs: a table for the terminal, Markdown for a PR comment, JSON for machines."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_rollout_chaos.gate.compare import (
    CHANGES,
    EXIT_FAIL,
    EXIT_PASS,
    UNCHANGED,
    GateDecision,
    ScenarioComparison,
)
from pytest_rollout_chaos.gate.environment import differences
from pytest_rollout_chaos.gate.sides import SideRun
from pytest_rollout_chaos.gate.verdicts import ScenarioVerdicts

_SHOWN = {
    "passed": "passed",
    "failed": "FAILED",
    "error": "ERROR",
    "skipped": "skipped",
    "not_judged": "NOT JUDGED",
}
FORMAT_VERSION = 2  # of the JSON: 2 split "same" into passed, failed and skipped on both


def _cell(verdicts: ScenarioVerdicts | None) -> str:
    return "-" if verdicts is None else _SHOWN[verdicts.outcome]


def _change(scenario: ScenarioComparison) -> str:
    return f"{scenario.change} (expected)" if scenario.expected_fixed else scenario.change


def summary(decision: GateDecision) -> str:
    """One line: the decision, how many scenarios moved which way, how many were judged on both sides."""
    counts = ", ".join(f"{decision.count(change)} {change}" for change in CHANGES if decision.count(change))
    judged = f"; {decision.judged} of {len(decision.scenarios)} judged on both sides"
    return f"gate {decision.verdict}: {counts or 'no scenarios'}{judged if decision.scenarios else ''}"


@dataclass(frozen=True, slots=True)
class Took:
    """The gate's own wall time, and whether its sides ran at the same time."""

    wall_s: float
    at_once: bool

    def line(self) -> str:
        how = "at the same time" if self.at_once else "one after the other"
        return f"gate: {self.wall_s:.0f} s, the sides {how}"


def text(decision: GateDecision, base: SideRun, head: SideRun, took: Took | None = None) -> str:
    """The terminal table, scenario x base x head, then the sides' wall times and the failures."""
    rows = [("scenario", "base", "head", "change", "invariants that flipped")]
    rows += [
        (s.name, _cell(s.base), _cell(s.head), _change(s), ", ".join(s.flipped) or "")
        for s in decision.scenarios
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[4]
        for row in rows
    ]
    lines.append("")
    if took is not None:
        lines.append(took.line())
    for side in (base, head):
        lines.append(f"{side.label}: {side.tree} ({side.wall_s:.0f} s, pytest exit {side.exit_code})")
        if side.environment is not None:
            env = side.environment
            lines.append(f"  trainer {env.trainer()}")
            lines.append(f"  {env.executable}{f' ({env.python_from})' if env.python_from else ''}")
            lines.append(f"  {env.describe()}")
            if env.python_warning is not None:
                lines.append(f"  WARNING: {env.python_warning}")
    differ = environment_differences(base, head)
    if differ:
        lines.append("ENVIRONMENTS DIFFER between the sides (a verdict may move for that alone):")
        lines += [f"  {line}" for line in differ]
    lines += [f"  {failure}" for failure in (*decision.failures, *decision.not_judged)]
    if decision.unstable:
        lines.append("UNSTABLE (moved in some runs only; neither fixed nor regressed):")
        lines += [f"  {line}" for line in decision.unstable]
    lines.append(summary(decision))
    return "\n".join(lines)


def markdown(decision: GateDecision, base: SideRun, head: SideRun, target: str) -> str:
    """A PR comment: the decision first, then what changed, then the unchanged scenarios folded."""
    mark = {EXIT_PASS: "✅", EXIT_FAIL: "❌"}.get(decision.exit_code, "⚠️")
    lines = [
        f"### {mark} rollout-chaos gate (`{target}`): {summary(decision).removeprefix('gate ')}",
        "",
        f"base `{base.tree.name}` ({base.wall_s:.0f} s) → head `{head.tree.name}` ({head.wall_s:.0f} s)",
        "",
    ]
    if decision.failures or decision.not_judged:
        lines += [f"- **{line}**" for line in (*decision.failures, *decision.not_judged)] + [""]
    if decision.unstable:
        lines += [f"- unstable: {line}" for line in decision.unstable] + [""]
    warnings = [side.environment.python_warning for side in (base, head) if side.environment is not None]
    lines += [f"- ⚠️ {warning}" for warning in warnings if warning is not None]
    lines += [""] if any(warnings) else []
    lines += _environment_table(base, head)
    moved = [s for s in decision.scenarios if s.change not in UNCHANGED]
    still = [s for s in decision.scenarios if s.change in UNCHANGED]
    if moved:
        lines += ["| scenario | base | head | change | invariants that flipped |", "|---|---|---|---|---|"]
        lines += [
            f"| `{s.name}` | {_cell(s.base)} | {_cell(s.head)} | {_change(s)} | {', '.join(s.flipped)} |"
            for s in moved
        ]
        lines.append("")
    if still:
        lines += [
            f"<details><summary>{len(still)} scenario(s) unchanged</summary>",
            "",
            "| scenario | on both sides |",
            "|---|---|",
        ]
        lines += [f"| `{s.name}` | {s.change.removesuffix(' on both')} |" for s in still]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def as_json(
    decision: GateDecision,
    base: SideRun,
    head: SideRun,
    *,
    target: str,
    seed: int,
    scenarios: Sequence[str],
    reruns: Sequence[tuple[SideRun, SideRun]] = (),
    took: Took | None = None,
) -> str:
    """Per scenario and side, the outcome and each invariant's verdict; the decision and its reasons;
    each rerun of the scenarios that moved, with its seed and verdicts."""
    document: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "target": target,
        "seed": seed,
        "scenario_paths": list(scenarios),
        "wall_s": round(took.wall_s, 1) if took is not None else None,
        "sides_at_once": took.at_once if took is not None else None,
        "base": base.to_json(),
        "head": head.to_json(),
        "passed": decision.passed,
        "exit_code": decision.exit_code,
        "verdict": decision.verdict,
        "failures": list(decision.failures),
        "not_judged": list(decision.not_judged),
        "unstable": list(decision.unstable),
        "judged_on_both": decision.judged,
        "reached": decision.reached,
        "reruns": [
            {
                "run": at,
                "seed": seed + at - 1,
                "sides": {
                    side.label.partition("-")[0]: {
                        **side.to_json(),
                        "verdicts": {name: verdicts.to_json() for name, verdicts in side.verdicts.items()},
                    }
                    for side in pair
                },
            }
            for at, pair in enumerate(reruns, start=2)
        ],
        "environments_differ": environment_differences(base, head),
        "scenarios": [scenario.to_json() for scenario in decision.scenarios],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def environment_differences(base: SideRun, head: SideRun) -> list[str]:
    """What differs between the environments that ran the sides (empty when either is unknown)."""
    if base.environment is None or head.environment is None:
        return []
    return differences(base.environment, head.environment)


def _environment_table(base: SideRun, head: SideRun) -> list[str]:
    """Per side, the trainer's commit and the versions that ran it; a ⚠️ on every one that differs."""
    if base.environment is None or head.environment is None:
        return []
    envs = (base.environment, head.environment)
    lines = ["| | base | head |", "|---|---|---|"]
    lines.append(f"| trainer | `{envs[0].trainer()}` | `{envs[1].trainer()}` |")
    for name in dict.fromkeys([*envs[0].versions, *envs[1].versions]):
        ours, theirs = (
            env.versions.get(name) or ("unknown" if env.error else "not installed") for env in envs
        )
        flag = " ⚠️" if ours != theirs else ""
        lines.append(f"| {name}{flag} | {ours} | {theirs} |")
    differ = environment_differences(base, head)
    if differ:
        lines += ["", f"**⚠️ The sides ran in different environments:** {'; '.join(differ)}."]
    return [*lines, ""]
