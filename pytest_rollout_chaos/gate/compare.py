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

A scenario the collector declined to judge on a side (a skip that starts ``NOT_JUDGED:``, e.g. an
adapter whose copy of a trainer function no longer matches the tree) is neither fixed nor regressed:
it is not judged. What did not move is split by how it ended on both sides (passed, failed,
skipped), and the gate does not pass on too little: ``baseline`` must pass on both sides, and at
least half of the scenarios either side ran must have been judged (passed or red) on both.

A verdict that moved (fixed or regressed) may move by chance, where a fault's draws fell; the gate
runs such scenarios again with other seeds (``reruns``) and keeps the move only when every run
shows it; otherwise the scenario is ``unstable``, listed apart, failing nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from pytest_rollout_chaos.gate.verdicts import NOT_JUDGED_OUTCOME, RED, MissingModule, ScenarioVerdicts

Change = Literal[
    "fixed",
    "regression",
    "unstable",
    "not judged",
    "skip allowed",
    "changed",
    "passed on both",
    "failed on both",
    "skipped on both",
    "base only",
    "head only",
]
CHANGES: Final[tuple[Change, ...]] = get_args(Change)
"""Every change, in the order the summary counts them."""
UNCHANGED: Final[tuple[Change, ...]] = ("passed on both", "failed on both", "skipped on both")
"""What did not move: the three kinds of "same"."""
MOVED: Final[tuple[Change, ...]] = ("fixed", "regression")
"""The moves a rerun must confirm."""
BASELINE: Final = "baseline"
"""The scenario that must pass on both sides for any verdict to mean something."""
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
    runs: tuple[Change, ...] = ()  # a moved verdict's change in each run, the first included

    @property
    def judged(self) -> bool:
        """Passed or red on both sides, with every module of the trainer there."""
        return all(
            side is not None and side.missing is None and side.outcome in ("passed", *RED)
            for side in (self.base, self.head)
        )

    @property
    def reached(self) -> bool:
        """Run on at least one side: passed, red or declined to judge there."""
        return any(side is not None and side.outcome != "skipped" for side in (self.base, self.head))

    def to_json(self) -> dict[str, object]:
        return {
            "scenario": self.name,
            "change": self.change,
            "expected_fixed": self.expected_fixed,
            "judged": self.judged,
            "runs": list(self.runs),
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
    unstable: tuple[str, ...] = field(default=())  # shown apart; they fail nothing

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

    @property
    def judged(self) -> int:
        """How many scenarios were judged on both sides."""
        return sum(1 for scenario in self.scenarios if scenario.judged)

    @property
    def reached(self) -> int:
        """How many scenarios either side ran (not skipped on both)."""
        return sum(1 for scenario in self.scenarios if scenario.reached)


def compare(
    base: Mapping[str, ScenarioVerdicts],
    head: Mapping[str, ScenarioVerdicts],
    expect_fixed: Iterable[str] = (),
    allow_skip: Iterable[str] = (),
    reruns: Sequence[tuple[Mapping[str, ScenarioVerdicts], Mapping[str, ScenarioVerdicts]]] = (),
) -> GateDecision:
    """Compare ``base`` with ``head``; regressions and unmet ``expect_fixed`` fail the gate.

    ``allow_skip`` names scenarios head may skip or leave out although base passed them.
    ``reruns`` holds the (base, head) verdicts of each further run of the scenarios that moved, with
    other seeds: a move that does not hold in each of them is ``unstable``.
    """
    expected, allowed = set(expect_fixed), set(allow_skip)
    scenarios = tuple(
        _confirmed(
            _compare_one(name, base.get(name), head.get(name), name in expected, name in allowed),
            reruns,
            allowed,
        )
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
        if s.expected_fixed and not _missing(s) and not _declined(s) and s.change != "unstable"
        for problem in _unmet(s.name, s.base, s.head)
    ]
    failures += [
        f"{name}: --expect-fixed names a scenario that ran on neither side"
        for name in sorted(expected - {s.name for s in scenarios})
    ]
    not_judged = _missing_on("base", base) + _missing_on("head", head)
    not_judged += [_not_judged(s) for s in scenarios if s.change == "not judged" and not _missing(s)]
    not_judged += [
        f"{s.name}: expected fixed, but the move held in only some runs ({_runs(s)})"
        for s in scenarios
        if s.expected_fixed and s.change == "unstable"
    ]
    not_judged += _too_little_judged(scenarios)
    unstable = tuple(
        f"{s.name}: unstable over {len(s.runs)} runs ({_runs(s)})"
        for s in scenarios
        if s.change == "unstable"
    )
    return GateDecision(
        scenarios=scenarios, failures=tuple(failures), not_judged=tuple(not_judged), unstable=unstable
    )


def moved(decision: GateDecision) -> list[str]:
    """The scenarios whose verdict moved (fixed or regressed): what a rerun must confirm."""
    return [scenario.name for scenario in decision.scenarios if scenario.change in MOVED]


def _confirmed(
    first: ScenarioComparison,
    reruns: Sequence[tuple[Mapping[str, ScenarioVerdicts], Mapping[str, ScenarioVerdicts]]],
    allowed: set[str],
) -> ScenarioComparison:
    """``first``, its move checked against each rerun: kept when every run shows it, else unstable."""
    if first.change not in MOVED or not reruns:
        return first
    again = [
        _compare_one(first.name, base.get(first.name), head.get(first.name), False, first.name in allowed)
        for base, head in reruns
    ]
    runs = (first.change, *(rerun.change for rerun in again))
    change: Change = first.change if all(run == first.change for run in runs) else "unstable"
    return dataclasses.replace(first, change=change, runs=runs)


def _too_little_judged(scenarios: Sequence[ScenarioComparison]) -> list[str]:
    """Why the gate judged too little to pass: ``baseline`` not green on both sides, or fewer than
    half of the scenarios either side ran judged on both."""
    problems = []
    baseline = next((s for s in scenarios if s.name == BASELINE), None)
    if baseline is not None and not all(
        side is not None and side.outcome == "passed" for side in (baseline.base, baseline.head)
    ):
        problems.append(
            f"{BASELINE}: not judged: it must pass on both sides for any verdict to mean something, "
            f"but it {_ended(baseline.base)} on base and {_ended(baseline.head)} on head"
        )
    judged = sum(1 for s in scenarios if s.judged)
    reached = sum(1 for s in scenarios if s.reached)
    if 2 * judged < reached:
        problems.append(
            f"not judged: only {judged} of the {reached} scenarios the sides ran were judged (passed or "
            "red) on both; fewer than half is too little to pass a gate on"
        )
    return problems


def _runs(scenario: ScenarioComparison) -> str:
    return ", ".join(f"run {at}: {change}" for at, change in enumerate(scenario.runs, start=1))


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
    if NOT_JUDGED_OUTCOME in (base.outcome, head.outcome if head is not None else None):
        return ScenarioComparison(name, base, head, "not judged", expected_fixed=expected_fixed)
    if head is None or head.outcome == "skipped":
        if base.outcome == "passed":
            change = "skip allowed" if allowed_skip else "regression"
        elif base.red:
            change = "not judged"
        else:
            change = "base only" if head is None else "skipped on both"
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
        change = "passed on both" if base.outcome == "passed" else "failed on both"
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
    declined = [
        f"{label}: {side.message}"
        for label, side in (("base", base), ("head", head))
        if side is not None and side.outcome == NOT_JUDGED_OUTCOME
    ]
    if declined:
        return f"{scenario.name}: not judged, neither fixed nor regressed ({'; '.join(declined)})"
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


def _declined(scenario: ScenarioComparison) -> bool:
    """The collector declined to judge the scenario on a side (``NOT_JUDGED``)."""
    return any(
        side is not None and side.outcome == NOT_JUDGED_OUTCOME for side in (scenario.base, scenario.head)
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
