"""pytest's side of ``*.chaos.yaml``: one ``ScenarioItem`` per file, its runner and its JUnit facts.

``ScenarioItem`` is a ``pytest.Function`` whose ``callobj`` takes ``request``, so a YAML scenario
gets the same session fixtures (servers, harness) as Python tests through public API only. The
file is validated at collection time: a bad file is a collection error. The scenario itself is
run by the ``chaos_scenario_runner`` fixture, ``run_scenario`` unless a conftest overrides it;
``run_scenario`` hands the session's stack to the engine and stashes the result on the item,
where the reports and ``add_junit_properties`` (the one writer of JUnit properties) read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from pytest_rollout_chaos import fuzz
from pytest_rollout_chaos.engine import story
from pytest_rollout_chaos.engine.next_steps import outcome_text
from pytest_rollout_chaos.errors import (
    NOT_JUDGED_PREFIX,
    CannotRunHere,
    CollectorContractError,
    FaultError,
    InvariantViolation,
    NotJudgedError,
    ScenarioError,
)
from pytest_rollout_chaos.report.reports import RESULT_KEY
from pytest_rollout_chaos.scenario.draw import Draw, DrawError
from pytest_rollout_chaos.scenario.model import Scenario, load_scenario

if TYPE_CHECKING:
    from pytest_rollout_chaos.settings import ChaosSettings
    from pytest_rollout_chaos.stack import ChaosStack

ScenarioRunner = Callable[[Scenario, pytest.FixtureRequest], None]

RUNNER_FIXTURE: Final = "chaos_scenario_runner"
FUZZ_MARKER: Final = "fuzz"  # every drawn item (``-m "not fuzz"`` leaves them out)
STORY_ERRORS: Final = (InvariantViolation, FaultError, ScenarioError, CollectorContractError)


class ScenarioFile(pytest.File):
    """A ``*.chaos.yaml`` file; a file with problems is a collection error listing them.

    ``settings`` are the run's: ``policy_targets`` are checked against the policy replicas it
    starts (unless the file asks for its own), and with ``--rollout-chaos-fuzz`` the file yields
    its drawn variants after its scenario (``fuzz``).
    """

    def __init__(self, *, settings: ChaosSettings, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    def collect(self) -> Iterable[pytest.Item]:
        settings = self.settings
        scenario = load_scenario(
            self.path,
            shown_as=_relative(self.path, self.config.invocation_params.dir),
            policy_replicas=settings.policy_replicas,
        )
        for tag in scenario.tags:
            _register_marker(self.config, tag)
        yield ScenarioItem.from_parent(
            self, name=scenario.name, callobj=_scenario_test(scenario), scenario=scenario
        )
        if not settings.fuzz:
            return
        text = self.path.read_text(encoding="utf-8")
        for index, made in fuzz.draws(scenario, text, seed=settings.seed, count=settings.fuzz):
            if isinstance(made, DrawError):
                yield ScenarioItem.from_parent(
                    self, name=f"{scenario.name}-fuzz-{index}", callobj=_cannot_draw(made), scenario=scenario
                )
                continue
            test = _draw_test(made, text, seed=settings.seed, out_dir=settings.fuzz_dir)
            item = ScenarioItem.from_parent(self, name=made.name, callobj=test, scenario=made.scenario)
            item.add_marker(FUZZ_MARKER)
            yield item

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        # A bad file is the user's input, not our bug: the problems, no traceback.
        if isinstance(excinfo.value, ScenarioError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class ScenarioItem(pytest.Function):
    """One scenario as a test: markers from ``tags``, location at the YAML line, failures as stories."""

    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.add_marker("chaos")
        for tag in scenario.tags:
            self.add_marker(tag)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.scenario.line - 1, f"scenario: {self.scenario.name}"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        # ``style`` mirrors Node.repr_failure; pytest calls items with ``excinfo`` only.
        if isinstance(excinfo.value, STORY_ERRORS):
            return story.tell(self.scenario, excinfo.value)
        return super().repr_failure(excinfo)


def _scenario_test(scenario: Scenario) -> Callable[[pytest.FixtureRequest], None]:
    def run_scenario(request: pytest.FixtureRequest) -> None:
        runner: ScenarioRunner = request.getfixturevalue(RUNNER_FIXTURE)
        runner(scenario, request)

    return run_scenario


def _draw_test(made: Draw, text: str, *, seed: int, out_dir: Path) -> Callable[[pytest.FixtureRequest], None]:
    def run_draw(request: pytest.FixtureRequest) -> None:
        __tracebackhide__ = True
        runner: ScenarioRunner = request.getfixturevalue(RUNNER_FIXTURE)
        fuzz.run_draw(made, text, runner=runner, request=request, seed=seed, out_dir=out_dir)

    return run_draw


def _cannot_draw(error: DrawError) -> Callable[[pytest.FixtureRequest], None]:
    def cannot_draw(request: pytest.FixtureRequest) -> None:
        pytest.skip(f"no draw: {error}")

    return cannot_draw


def run_scenario(scenario: Scenario, request: pytest.FixtureRequest) -> None:
    """The default runner: ``scenario`` on the session's stack; raises unless all is well.

    The collector is loaded first, so a scenario it cannot express skips before the stack starts.
    """
    __tracebackhide__ = True
    from pytest_rollout_chaos.engine import run

    settings: ChaosSettings = request.getfixturevalue("chaos_settings")
    try:
        loaded = run.collector_for(scenario, settings.target)
        stack: ChaosStack = request.getfixturevalue("chaos_stack")
        result = run.run_on(scenario, stack, loaded, settings)
    except CannotRunHere as reason:  # the fit step: nothing judged, said why
        pytest.skip(str(reason))
    except NotJudgedError as declined:  # the collector declined the scenario
        pytest.skip(NOT_JUDGED_PREFIX + str(declined))
    request.node.stash[RESULT_KEY] = result
    story.raise_for(result)


def add_junit_properties(item: pytest.Item) -> None:
    """A scenario item's facts as JUnit XML properties, added after its call, before its report.

    From the file: ``scenario``, ``scenario_file``, ``upstream``, ``tags``. From the stashed
    result, when the runner left one: ``outcome``, ``faults_injected``, one ``invariant:NAME``
    per verdict (PASS, FAIL, UNKNOWN or NOT_JUDGED), one ``witness:NAME`` per witness the
    scenario names (``seen N`` or ``NOT_SEEN N``), ``rows``, ``elapsed_s``, ``passed``
    (``rollout-chaos gate`` reads them back), and one ``collection:N`` per collection after the
    first (``workload.collections``): how it ended.
    """
    scenario = getattr(item, "scenario", None)
    if not isinstance(scenario, Scenario):
        return
    result = item.stash.get(RESULT_KEY, None)
    properties: list[tuple[str, object]] = [("scenario", scenario.name)]
    if result is not None:
        properties += [("outcome", result.outcome()), ("faults_injected", result.faults_injected)]
        properties += [(f"invariant:{verdict.name}", verdict.status.value) for verdict in result.verdicts]
        properties += [
            (f"witness:{sighting.name}", f"{'seen' if sighting.seen else 'NOT_SEEN'} {sighting.count.seen}")
            for sighting in result.witnesses
        ]
    properties += [
        ("scenario_file", f"{scenario.path}:{scenario.line}"),
        ("upstream", ", ".join(scenario.upstream)),
        ("tags", ", ".join(scenario.tags)),
    ]
    if result is not None:
        properties += [
            ("rows", len(result.rows)),
            ("elapsed_s", round(result.elapsed_s, 3)),
            ("passed", result.passed),
        ]
        properties += [
            (f"collection:{follow_up.number}", outcome_text(follow_up)) for follow_up in result.follow_ups
        ]
    item.user_properties.extend(properties)


def _relative(path: Path, base: Path) -> Path:
    """``path`` as the user would type it from ``base``, when it lies below it."""
    try:
        return path.relative_to(base)
    except ValueError:
        return path


def _register_marker(config: pytest.Config, tag: str) -> None:
    """Tags become markers; register them so that ``--strict-markers`` accepts them."""
    known = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}
    if tag not in known:
        config.addinivalue_line("markers", f"{tag}: rollout-chaos scenario tag")
