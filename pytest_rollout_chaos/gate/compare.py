"""Comparing the two sides scenario by scenario, and the gate's decision.

A regression is a scenario that passed on base and is red, skipped or missing on head (a skip is
not a fix: a head that stops running a scenario must not pass for having fixed it); a skip the PR
means is named with ``--allow-skip``. An ``--expect-fixed`` scenario must be red on base and pass
on head. What cannot be judged fails neither way but keeps the gate from passing: a scenario red
on base and skipped or missing on head, a scenario red on base that passes on head only because
the invariants that failed on base found nothing to judge there (NOT_JUDGED: a pass over nothing
is not a fix), and a side whose collector could not import a module of the trainer (every such
verdict is about the environment, not the trainer). Everything else that changed is shown, not
judged: red on both sides for different invariants, skipped on base only, an invariant judged on
one side and NOT_JUDGED on the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from pytest_rollout_chaos.gate.verdicts import MissingModule, ScenarioVerdicts

Change = Literal[
    "regression", "fixed", "not judged", "skip allowed", "changed", "same", "base only", "head only"
]
CHANGES: Final[tuple[Change, ...]] = (
    "fixed",
    "regression",
    "not judged",
    "skip allowed",
    "changed",
    "same",
    "base only",
    "head only",
)
EXIT_PASS: Final = 0
EXIT_FAIL: Final = 1
EXIT_NOT_JUDGED: Final = 2
NOT_JUDGED: Final = "NOT_JUDGED"  # an invariant's status when it found nothing to judge


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
    """Every scenario compared; why the gate fails, and what it could not judge.

    A failure (exit 1) is evidence against head and outranks what was not judged (exit 2).
    """

    scenarios: tuple[ScenarioComparison, ...]
    failures: tuple[str, ...] = field(default=())
    not_judged: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return not self.failures and not self.not_judged

    @property
    def exit_code(self) -> int:
        if self.failures:
            return EXIT_FAIL
        return EXIT_NOT_JUDGED if self.not_judged else EXIT_PASS

    @property
    def verdict(self) -> str:
        """``PASS``, ``FAIL`` or ``NOT JUDGED``, as the exit code says."""
        return {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL"}.get(self.exit_code, "NOT JUDGED")

    def count(self, change: Change) -> int:
        return sum(1 for scenario in self.scenarios if scenario.change == change)


def compare(
    base: Mapping[str, ScenarioVerdicts],
    head: Mapping[str, ScenarioVerdicts],
    expect_fixed: Iterable[str] = (),
    allow_skip: Iterable[str] = (),
) -> GateDecision:
    """Compare ``base`` with ``head``; regressions and unmet ``expect_fixed`` fail the gate.

    ``allow_skip`` names scenarios head may skip or leave out although base passed them.
    """
    expected, allowed = set(expect_fixed), set(allow_skip)
    scenarios = tuple(
        _compare_one(name, base.get(name), head.get(name), name in expected, name in allowed)
        for name in sorted(set(base) | set(head))
    )
    failures = [
        f"{s.name}: regression: passed on base, {_on_head(s.head)}" + _skip_hint(s)
        for s in scenarios
        if s.change == "regression"
    ]
    failures += [
        problem
        for s in scenarios
        if s.expected_fixed and not _missing(s)  # the environment's fault: not judged below
        for problem in _unmet(s.name, s.base, s.head)
    ]
    failures += [
        f"{name}: --expect-fixed names a scenario that ran on neither side"
        for name in sorted(expected - {s.name for s in scenarios})
    ]
    not_judged = _missing_on("base", base) + _missing_on("head", head)
    not_judged += [_not_judged(s) for s in scenarios if s.change == "not judged" and not _missing(s)]
    return GateDecision(scenarios=scenarios, failures=tuple(failures), not_judged=tuple(not_judged))


def _compare_one(
    name: str,
    base: ScenarioVerdicts | None,
    head: ScenarioVerdicts | None,
    expected_fixed: bool,
    allowed_skip: bool,
) -> ScenarioComparison:
    change: Change
    if (base is not None and base.missing) or (head is not None and head.missing):
        return ScenarioComparison(name, base, head, "not judged", expected_fixed=expected_fixed)
    if base is None:
        return ScenarioComparison(name, base, head, "head only", expected_fixed=expected_fixed)
    if head is None or head.outcome == "skipped":
        if base.outcome == "passed":
            change = "skip allowed" if allowed_skip else "regression"
        elif base.red:
            change = "not judged"
        else:
            change = "base only" if head is None else "same"
        return ScenarioComparison(name, base, head, change, expected_fixed=expected_fixed)
    flipped = tuple(
        f"{invariant} {base.invariants.get(invariant, '-')}→{head.invariants.get(invariant, '-')}"
        for invariant in sorted(set(base.invariants) | set(head.invariants))
        if base.invariants.get(invariant) != head.invariants.get(invariant)
    )
    if base.outcome == "passed" and head.red:
        change = "regression"
    elif base.red and head.outcome == "passed":
        change = "not judged" if _unjudged_on_head(base, head) else "fixed"
    elif base.outcome != head.outcome or flipped:
        change = "changed"
    else:
        change = "same"
    return ScenarioComparison(name, base, head, change, flipped, expected_fixed)


def _unjudged_on_head(base: ScenarioVerdicts, head: ScenarioVerdicts) -> list[str]:
    """The invariants that were against the collector on base and judged nothing on head; none
    when head passed one of them. A fix that stops a raise leaves ``raise_has_cause`` with nothing
    to judge, and that is fine as long as what failed beside it (``isolated_failures``) now passes."""
    against = [name for name, status in sorted(base.invariants.items()) if status in ("FAIL", "UNKNOWN")]
    if any(head.invariants.get(name) == "PASS" for name in against):
        return []
    return [name for name in against if head.invariants.get(name) == NOT_JUDGED]


def _not_judged(scenario: ScenarioComparison) -> str:
    base, head = scenario.base, scenario.head
    if base is not None and head is not None and head.outcome == "passed":
        names = ", ".join(f"{name} NOT_JUDGED" for name in _unjudged_on_head(base, head))
        return (
            f"{scenario.name}: not judged: {base.outcome} on base, passed on head without judging what "
            f"failed on base ({names} on head); a pass that judged nothing is not a fix"
        )
    return (
        f"{scenario.name}: not judged: {base.outcome if base else '?'} on base, {_on_head(head)}; "
        "a skip is not a fix"
    )


def _missing(scenario: ScenarioComparison) -> bool:
    return any(side is not None and side.missing for side in (scenario.base, scenario.head))


def _missing_on(label: str, verdicts: Mapping[str, ScenarioVerdicts]) -> list[str]:
    """One line per module the side's collector could not import: which scenarios, and how to
    install it; none when every module was there."""
    by_module: dict[MissingModule, list[str]] = {}
    for name, scenario in sorted(verdicts.items()):
        if scenario.missing is not None:
            by_module.setdefault(scenario.missing, []).append(name)
    lines = []
    for missing, names in by_module.items():
        install = missing.install or (
            f"pip install the package that provides {missing.module.split('.')[0]!r} "
            "into the trainer's environment (the gate's --python)"
        )
        lines.append(
            f"{label}: not judged: the trainer could not be imported in {len(names)} scenario(s) "
            f"({', '.join(names)}): module {missing.module!r} is missing; install it with: {install}"
        )
    return lines


def _skip_hint(scenario: ScenarioComparison) -> str:
    if scenario.head is not None and scenario.head.outcome != "skipped":
        return ""
    return f"; a skip is not a fix (if head means to stop running it: --allow-skip {scenario.name})"


def _unmet(name: str, base: ScenarioVerdicts | None, head: ScenarioVerdicts | None) -> list[str]:
    """Why ``name`` does not count as fixed: it must be red on base and pass on head."""
    problems = []
    if base is None or not base.red:
        problems.append(f"on base it {_ended(base)}, not red")
    if head is None or head.outcome != "passed":
        problems.append(f"on head it {_ended(head)}, not passed")
    return [f"{name}: expected fixed, but " + "; ".join(problems)] if problems else []


def _on_head(verdicts: ScenarioVerdicts | None) -> str:
    """``failed on head (why)``, ``skipped on head (why)``, or ``did not run on head``."""
    if verdicts is None:
        return "did not run on head"
    reason = f" ({verdicts.message.splitlines()[0]})" if verdicts.message else ""
    return f"{verdicts.outcome} on head{reason}"


def _ended(verdicts: ScenarioVerdicts | None) -> str:
    if verdicts is None:
        return "did not run"
    reason = f" ({verdicts.message.splitlines()[0]})" if verdicts.message else ""
    return f"{verdicts.outcome}{reason}"
