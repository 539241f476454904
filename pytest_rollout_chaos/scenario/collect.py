"""pytest collection of ``*.chaos.yaml``: one ``ScenarioItem`` per file, validated at collection time.

``ScenarioItem`` is a ``pytest.Function`` whose ``callobj`` takes ``request``, so a YAML scenario
gets the same session fixtures (servers, harness) as Python tests through public API only. The
scenario itself is run by the ``chaos_scenario_runner`` fixture, which a conftest may override.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import pytest

from pytest_rollout_chaos.errors import CollectorContractError, FaultError, InvariantViolation, ScenarioError
from pytest_rollout_chaos.scenario import story
from pytest_rollout_chaos.scenario.model import SUFFIX, Scenario, load_scenario

ScenarioRunner = Callable[[Scenario, pytest.FixtureRequest], None]

RUNNER_FIXTURE: Final = "chaos_scenario_runner"
RUNNER_MODULE: Final = "pytest_rollout_chaos.scenario.run"
NO_RUNNER: Final = "the scenario runner (pytest_rollout_chaos.scenario.run) is not available in this build"
STORY_ERRORS: Final = (InvariantViolation, FaultError, ScenarioError, CollectorContractError)


def is_scenario_file(path: Path) -> bool:
    """Only the distinctive suffix is collected, never other YAML (CI configs, datasets)."""
    return path.name.endswith(SUFFIX)


class ScenarioFile(pytest.File):
    """A ``*.chaos.yaml`` file; a file with problems is a collection error listing them."""

    def collect(self) -> Iterable[pytest.Item]:
        scenario = load_scenario(self.path, shown_as=_relative(self.path, self.config.invocation_params.dir))
        for tag in scenario.tags:
            _register_marker(self.config, tag)
        yield ScenarioItem.from_parent(
            self, name=scenario.name, callobj=_scenario_test(scenario), scenario=scenario
        )

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


def default_runner() -> ScenarioRunner:
    """The runner of ``scenario/run.py`` (``run_scenario(scenario, request)``), or one that skips."""
    if importlib.util.find_spec(RUNNER_MODULE) is None:
        return _skip_without_runner
    runner: ScenarioRunner = importlib.import_module(RUNNER_MODULE).run_scenario
    return runner


def _skip_without_runner(scenario: Scenario, request: pytest.FixtureRequest) -> None:
    pytest.skip(f"{scenario.name}: {NO_RUNNER}")


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
