"""Comparing the two sides scenario by scenario, and the gate's decision.

A regression is a scenario that passed on base and is red on head. An ``--expect-fixed`` scenario
must be red on base and pass on head. Everything else that changed is shown, not judged: a
scenario skipped on one side only, or red on both for different invariants.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from pytest_rollout_chaos.gate.verdicts import ScenarioVerdicts

Change = Literal["regression", "fixed", "changed", "same", "base only", "head only"]
EXIT_PASS: Final = 0
EXIT_FAIL: Final = 1


@dataclass(frozen=True, slots=True)
class ScenarioComparison:
    """One scenario on both sides: what changed, and which invariants flipped."""

    name: str
    base: ScenarioVerdicts | None
    head: ScenarioVerdicts | None
    change: Change
    flipped: tuple[str, ...] = ()
    expected_fixed: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "scenario": self.name,
            "change": self.change,
            "expected_fixed": self.expected_fixed,
            "flipped": list(self.flipped),
            "base": self.base.to_json() if self.base else None,
            "head": self.head.to_json() if self.head else None,
        }


@dataclass(frozen=True, slots=True)
class GateDecision:
    """Every scenario compared, and why the gate fails (empty when it passes)."""

    scenarios: tuple[ScenarioComparison, ...]
    failures: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return EXIT_PASS if self.passed else EXIT_FAIL

    def count(self, change: Change) -> int:
        return sum(1 for scenario in self.scenarios if scenario.change == change)


def compare(
    base: Mapping[str, ScenarioVerdicts],
    head: Mapping[str, ScenarioVerdicts],
    expect_fixed: Iterable[str] = (),
) -> GateDecision:
    """Compare ``base`` with ``head``; regressions and unmet ``expect_fixed`` fail the gate."""
    expected = set(expect_fixed)
    scenarios = tuple(
        _compare_one(name, base.get(name), head.get(name), name in expected)
        for name in sorted(set(base) | set(head))
    )
    failures = [
        f"{s.name}: regression: passed on base, {s.head.outcome if s.head else '?'} on head"
        + (f" ({s.head.message.splitlines()[0]})" if s.head and s.head.message else "")
        for s in scenarios
        if s.change == "regression"
    ]
    for name in sorted(expected):
        failures += _unmet(name, base.get(name), head.get(name))
    return GateDecision(scenarios=scenarios, failures=tuple(failures))


def _compare_one(
    name: str, base: ScenarioVerdicts | None, head: ScenarioVerdicts | None, expected_fixed: bool
) -> ScenarioComparison:
    if base is None or head is None:
        change: Change = "head only" if base is None else "base only"
        return ScenarioComparison(name, base, head, change, expected_fixed=expected_fixed)
    flipped = tuple(
        f"{invariant} {base.invariants.get(invariant, '-')}→{head.invariants.get(invariant, '-')}"
        for invariant in sorted(set(base.invariants) | set(head.invariants))
        if base.invariants.get(invariant) != head.invariants.get(invariant)
    )
    if base.outcome == "passed" and head.red:
        change = "regression"
    elif base.red and head.outcome == "passed":
        change = "fixed"
    elif base.outcome != head.outcome or flipped:
        change = "changed"
    else:
        change = "same"
    return ScenarioComparison(name, base, head, change, flipped, expected_fixed)


def _unmet(name: str, base: ScenarioVerdicts | None, head: ScenarioVerdicts | None) -> list[str]:
    """Why ``name`` does not count as fixed: it must be red on base and pass on head."""
    if base is None and head is None:
        return [f"{name}: --expect-fixed names a scenario that ran on neither side"]
    problems = []
    if base is None or not base.red:
        problems.append(f"on base it {_ended(base)}, not red")
    if head is None or head.outcome != "passed":
        problems.append(f"on head it {_ended(head)}, not passed")
    return [f"{name}: expected fixed, but " + "; ".join(problems)] if problems else []


def _ended(verdicts: ScenarioVerdicts | None) -> str:
    if verdicts is None:
        return "did not run"
    reason = f" ({verdicts.message.splitlines()[0]})" if verdicts.message else ""
    return f"{verdicts.outcome}{reason}"
