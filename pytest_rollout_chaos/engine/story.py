"""A scenario's failure as a story: what a judged run raises, and the text around it.

``raise_for`` raises what failed in a judged result with its text (outcome, every failed
expectation and verdict, what was not judged, the settings an adapter gave the trainer, the
timeline); ``tell`` wraps any error raised while running a scenario with the scenario and its
line, the fault schedule and a hint. Pure string building, so the collection module stays about
pytest and every runner raises the same text.
"""

from __future__ import annotations

import textwrap
import traceback
from collections.abc import Sequence
from typing import Final, Literal

from pytest_rollout_chaos.collector.adapters import trainer_settings
from pytest_rollout_chaos.engine import retarget, vacuity
from pytest_rollout_chaos.engine.result import ScenarioResult
from pytest_rollout_chaos.errors import (
    CollectorContractError,
    FaultError,
    InvariantViolation,
    ScenarioError,
    VacuousScenarioError,
)
from pytest_rollout_chaos.history import Event, History
from pytest_rollout_chaos.invariants.base import Status, Verdict
from pytest_rollout_chaos.scenario.model import Scenario

RAISE_FRAMES: Final = 6  # the frames of a raise the failure text shows: where in the trainer it broke
TIMELINE_EVENTS: Final = 40  # the events of its timeline (``in_timeline``) the failure text shows

HINT_INVARIANT: Final = (
    "the collector under test broke the invariant(s) above; the evidence events come from the run's "
    "History, and the log tails of the servers this story names follow (--rollout-chaos-logs=all: "
    "every server's)"
)
HINT_FAULT: Final = (
    "the harness could not inject or heal a fault: the environment is at fault, not the collector "
    "(check the proxy backend and process permissions, then rerun)"
)
HINT_SCENARIO: Final = "fix the scenario file; `rollout-chaos validate FILE` checks it without running"
HINT_VACUOUS: Final = (
    "the run did not produce what the scenario tests, so it proves nothing about the collector either "
    "way; see what was not judged or not seen above"
)
HINT_CONTRACT: Final = (
    "the collector under test does not keep its contract (docs/writing-a-collector.md); fix the "
    "collector or the factory named above, nothing was judged"
)
HINT_OTHER: Final = "see the traceback"


def raise_for(result: ScenarioResult) -> None:
    """Raise what failed in a judged ``result``: a fault error, an unfired or unacted step, a verdict."""
    __tracebackhide__ = True
    earlier = earlier_draws_text(result)
    if result.fault_errors:
        raise FaultError("\n".join(str(error) for error in result.fault_errors))
    if result.unfired:
        raise ScenarioError(earlier + unfired_text(result))
    if result.unacted:
        raise ScenarioError(earlier + unacted_text(result.unacted))
    if result.passed:
        return
    if _only_vacuous(result):
        raise VacuousScenarioError(earlier + vacuous_text(result))
    raise InvariantViolation(earlier + failure_text(result))


def earlier_draws_text(result: ScenarioResult) -> str:
    """The draws before the last, which tested nothing (``engine.run.run_on``), or ``""``."""
    if not result.earlier_draws:
        return ""
    lines = [
        f"drawn {len(result.earlier_draws) + 1} times (the policy samples irreproducibly); "
        "the earlier draws tested nothing:"
    ]
    lines += [f"  draw {number}: {why}" for number, why in enumerate(result.earlier_draws, 1)]
    return "\n".join([*lines, "", ""])


def tested_nothing(result: ScenarioResult) -> str | None:
    """Why the judged ``result`` is no verdict on the collector because the run gave the scenario
    nothing to judge (a fault unfired or touching nothing, a listed invariant not judged), or
    None: what ``raise_for`` would raise as a ``ScenarioError`` of the run's own making."""
    if result.fault_errors or result.passed:
        return None
    if result.unfired:
        return f"fault step at line {result.unfired[0].line} not triggered before the collection ended"
    if result.unacted:
        return f"fault touched nothing: {result.unacted[0]}"
    if _only_vacuous(result):
        return f"vacuous: {result.vacuous[0]}"
    return None


def tell(scenario: Scenario, error: BaseException) -> str:
    """The whole failure text for ``error`` raised while running ``scenario``."""
    lines = [f"scenario {scenario.name!r} failed ({scenario.path}:{scenario.line})"]
    lines += [f"  {line}" for line in scenario.summary.splitlines()]
    if scenario.upstream:
        lines.append(f"  upstream: {', '.join(scenario.upstream)}")
    lines.append("")
    lines += schedule_lines(scenario)
    lines.append("")
    lines.append(f"{type(error).__name__}:")
    lines.append(textwrap.indent(str(error).rstrip() or "(no message)", "  "))
    lines.append("")
    lines.append(f"hint: {hint_for(error)}")
    return "\n".join(lines)


def schedule_lines(scenario: Scenario) -> list[str]:
    """The declared fault schedule, one step per line with its YAML line; without one, the witnesses."""
    if not scenario.faults:
        witnessed = [f"witness: {name}, at least {least}" for name, least in scenario.expect.witness.items()]
        return ["fault schedule: none (a baseline run)", *witnessed]
    lines = ["fault schedule:"]
    for step in scenario.faults:
        lines.append(f"  line {step.line}: {step.describe()}")
    return lines


def hint_for(error: BaseException) -> str:
    if isinstance(error, InvariantViolation):
        return HINT_INVARIANT
    if isinstance(error, FaultError):
        return HINT_FAULT
    if isinstance(error, VacuousScenarioError):
        return HINT_VACUOUS
    if isinstance(error, ScenarioError):
        return HINT_SCENARIO
    if isinstance(error, CollectorContractError):
        return HINT_CONTRACT
    return HINT_OTHER


def unfired_text(result: ScenarioResult) -> str:
    """A scenario whose fault never happened proves nothing, even when every invariant passed."""
    steps = "\n".join(f"  line {step.line}: {step.describe()}" for step in result.unfired)
    return (
        f"the collection ended after {result.elapsed_s:.2f}s before these fault steps were triggered, "
        f"so the scenario tested nothing there:\n{steps}\n"
        "trigger them earlier (at: start, a lower after_completed or nth), or slow the workload "
        "(more rows, or a latency fault) so the collection is still running"
    )


def unacted_text(lines: Sequence[str], *, what: Literal["scenario", "test"] = "scenario") -> str:
    """A fault that touched nothing tested nothing, even when every invariant passed: the ``lines``
    (``acting.not_acted``), then what to do about it; one text for scenarios and Python tests."""
    faults = "\n".join(f"  {line}" for line in lines)
    when, opt_out = (
        ("trigger them while the collection runs", "expect_hits")
        if what == "scenario"
        else ("inject them while the collection runs", "expect_hits=")
    )
    return (
        f"these faults did not act on the collection, so the {what} tested nothing there:\n{faults}\n"
        f"aim them at what the workload uses (route, row, target), {when}, or say what they must "
        f"touch with {opt_out} (0 for a fault meant to hit nothing)"
    )


def vacuous_text(result: ScenarioResult) -> str:
    """A run that judged nothing of what the scenario lists proves nothing, pass or fail."""
    outcome = f"outcome: {result.outcome()} after {result.elapsed_s:.2f}s"
    return "\n".join([outcome, "", *vacuity.section(result.vacuous), "", vacuity.REMEDY])


def _only_vacuous(result: ScenarioResult) -> bool:
    """Nothing held against the collector, and something the scenario lists went unjudged or unseen."""
    return bool(result.vacuous) and not result.expectation_failures and not _failing(result)


def _failing(result: ScenarioResult) -> list[Verdict]:
    """The verdicts against the collector: FAIL and UNKNOWN (a NOT_JUDGED is in ``vacuous`` or silent)."""
    return [verdict for verdict in result.verdicts if verdict.status in (Status.FAIL, Status.UNKNOWN)]


def failure_text(result: ScenarioResult) -> str:
    """Outcome, every failed expectation and verdict, what was not judged, then the timeline."""
    lines = [f"outcome: {result.outcome()} after {result.elapsed_s:.2f}s", ""]
    if result.raised is not None and result.raised.__traceback__ is not None:
        frames = traceback.format_tb(result.raised.__traceback__)[-RAISE_FRAMES:]
        lines.append(f"raised at (the collector's last {len(frames)} frames, innermost last):")
        lines += ["  " + line for frame in frames for line in frame.rstrip().splitlines()]
        lines.append("")
    if result.expectation_failures:
        lines.append("expected:")
        lines += [f"  {failure}" for failure in result.expectation_failures]
        lines.append("")
    bad = _failing(result)
    if bad:
        lines.append("invariants:")
        lines += ["  " + line for verdict in bad for line in verdict.render().splitlines()]
        lines.append("")
    if result.vacuous:
        lines += [*vacuity.section(result.vacuous), ""]
    lines += settings_section(result.history)
    lines.append("timeline (faults, process exits, collection):")
    told = result.history.timeline(filter(in_timeline, result.history.events()), limit=TIMELINE_EVENTS)
    lines += [f"  {line}" for line in (told or "(no fault or collection events recorded)").splitlines()]
    return "\n".join(lines)


def settings_section(history: History) -> list[str]:
    """What an adapter gave the trainer's code (every setting, and why), when the collector is one,
    and what of the trainer's path it stood in for (each upstream call it recorded with a list), and
    the faults its retargets and retriggers moved (``engine.retarget``)."""
    lines = trainer_settings.section(history)
    stood_in: dict[str, list[str]] = {}
    for event in history.events(source="collector", kind="invoke", op="upstream"):
        if event.data.get("stood_in"):
            stood_in.setdefault(str(event.data.get("call")), [str(line) for line in event.data["stood_in"]])
    for call, listed in stood_in.items():
        lines.append(f"stood in for, on the way to {call}:")
        lines += [f"  {line}" for line in listed]
        lines.append("")
    moved = history.events(source=retarget.SOURCE, op=retarget.EVENT)
    if moved:
        lines.append("faults moved onto the collector's own requests (its retargets and retriggers):")
        lines += [
            f"  faults/{event.data.get('step')} {event.data.get('kind')}: "
            f"{event.data.get('from')} -> {event.data.get('to')}: {event.data.get('why')}"
            for event in moved
        ]
        lines.append("")
    return lines


def in_timeline(event: Event) -> bool:
    """Whether a reader needs ``event`` to follow the story: faults, exits, and the collection itself."""
    return (
        event.source in ("fault", "process")
        or (event.source == "collector" and event.op in ("collect", "retry"))
        or (event.source == "engine" and event.op == "collection")
    )
