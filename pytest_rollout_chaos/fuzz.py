"""``--rollout-chaos-fuzz=N``: each scenario run N more times, drawn, and a failing draw shrunk and kept.

Each draw (``scenario.draw``) is one more pytest item, ``NAME-fuzz-K``, run after every catalog
item (``last``), so the catalog's own scenarios see the policy's samples as they do without fuzz.
It runs through the same scenario runner as its scenario. A draw that fails is shrunk: its edits
are undone one at a time and each smaller draw is run, keeping any that still fails, until none
does (at most ``MAX_SHRINK_RUNS`` runs). The smallest failing draw is run once more (its story is
the item's) and written to the fuzz folder as a scenario file, which ``pytest --rollout-chaos
FILE`` runs again. A draw that tests nothing (a fault that never fires or touches nothing, a
stack that cannot run it) is skipped and says why; it is not a verdict on the collector.

The draws come from ``random`` seeded by the run's seed, not Hypothesis: every example is a real
collection of seconds, and the shrinker must stay within a known number of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from pytest_rollout_chaos.errors import CollectorContractError, InvariantViolation, ScenarioError
from pytest_rollout_chaos.scenario.draw import Draw, DrawError, document, draw, smaller

if TYPE_CHECKING:
    from pytest_rollout_chaos.scenario.model import Scenario

Runner = Callable[["Scenario", pytest.FixtureRequest], None]

MAX_SHRINK_RUNS: Final = 12
# What a draw can break: a verdict, a missed expectation, the collector's contract.
FAILURES: Final = (InvariantViolation, CollectorContractError)


def draws(scenario: Scenario, text: str, *, seed: int, count: int) -> Iterable[tuple[int, Draw | DrawError]]:
    """Draws 1..``count`` of ``scenario`` (its file's ``text``), or why each could not be made."""
    for index in range(1, count + 1):
        try:
            yield index, draw(scenario, text, seed=seed, index=index)
        except DrawError as error:
            yield index, error


def run_draw(
    made: Draw, text: str, *, runner: Runner, request: pytest.FixtureRequest, seed: int, out_dir: Path
) -> None:
    """Run ``made``; when it fails, shrink it, write the smallest failing draw and raise its failure."""
    __tracebackhide__ = True
    failure = _outcome(runner, made, request)
    if failure is None:
        return
    smallest, smallest_failure, runs = made, failure, 0
    shrinking = True
    while shrinking and runs < MAX_SHRINK_RUNS:
        shrinking = False
        for candidate in smaller(smallest, text):
            if runs >= MAX_SHRINK_RUNS:
                break
            runs += 1
            still = _failure_of(runner, candidate, request)
            if still is not None:
                smallest, smallest_failure, shrinking = candidate, still, True
                break
    if smallest is not made:  # once more, so its run is the one the item's reports show
        smallest_failure = _failure_of(runner, smallest, request) or smallest_failure
    path = _write(smallest, out_dir, seed=seed)
    request.node.scenario = smallest.scenario
    smallest_failure.args = (f"{smallest_failure}\n\n{_found(made, smallest, runs, path)}",)
    raise smallest_failure


def _outcome(runner: Runner, made: Draw, request: pytest.FixtureRequest) -> Exception | None:
    """The failure ``made`` ends in, or None when it passes; a skip when it tests nothing."""
    try:
        runner(made.scenario, request)
    except FAILURES as failure:
        return failure
    except ScenarioError as nothing:  # unfired, unacted or vacuous: the draw tested nothing
        pytest.skip(f"draw {made.index} tested nothing: {str(nothing).splitlines()[0]}")
    return None


def _failure_of(runner: Runner, candidate: Draw, request: pytest.FixtureRequest) -> Exception | None:
    """How a smaller draw still fails, or None; one that tests nothing or cannot run does not fail."""
    try:
        runner(candidate.scenario, request)
    except FAILURES as failure:
        return failure
    except (ScenarioError, pytest.skip.Exception):
        return None
    return None


def _write(smallest: Draw, out_dir: Path, *, seed: int) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{smallest.name}.chaos.yaml"
    path.write_text(document(smallest, source=smallest.original.path, seed=seed), encoding="utf-8")
    return path


def _found(made: Draw, smallest: Draw, runs: int, path: Path) -> str:
    lines = [f"fuzz: draw {made.index} of {made.original.name} fails; its edits:"]
    lines += [f"  {line}" for line in made.describe()]
    if smallest is not made:
        lines.append(f"shrunk in {runs} more run(s) to the smallest draw that still fails:")
        lines += [f"  {line}" for line in smallest.describe()]
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    lines.append(f"written to {shown}; run it again: pytest --rollout-chaos {shown}")
    return "\n".join(lines)
