"""``pytest --rollout-chaos`` in a trainer's repository, which has a test suite of its own: without
paths it runs the built-in catalog and the repository's ``*.chaos.yaml`` files only; naming paths,
or ``rollout_chaos_catalog = false``, runs the repository's tests as pytest always does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pytest_rollout_chaos import bundled

BUILTIN = sorted(path.name.removesuffix(".chaos.yaml") for path in bundled.catalog_dir().glob("*.chaos.yaml"))
OWN_SCENARIO = """\
name: {name}
description: the trainer's own scenario
expect:
  invariants: [accounted]
  witness: {{rows_answered: 1}}
"""
# The trainer's ordinary tests: they must not run in the scenarios-only run.
TRAINER_TESTS = """
def test_trainer_math():
    assert 1 + 1 == 2

def test_needs_a_gpu():
    assert 1 + 1 == 2
"""
# A runner that starts nothing: a scenario that runs says so and passes.
RUNNER_CONFTEST = """
import pytest

@pytest.fixture
def chaos_scenario_runner():
    def run(scenario, request):
        print("RAN", scenario.name)
    return run
"""
PYPROJECT = """
[tool.pytest.ini_options]
{testpaths}
asyncio_default_fixture_loop_scope = "function"
"""


def _trainer_repo(pytester: pytest.Pytester, *, testpaths: bool) -> None:
    """A trainer's checkout: tests/ with ordinary tests and a scenario, one more scenario at the top."""
    pytester.makepyprojecttoml(PYPROJECT.format(testpaths='testpaths = ["tests"]' if testpaths else ""))
    pytester.makeconftest(RUNNER_CONFTEST)
    tests = pytester.mkdir("tests")  # not a package: the outer suite has one named tests
    (tests / "test_trainer.py").write_text(TRAINER_TESTS)
    (tests / "chaos").mkdir()
    (tests / "chaos" / "my.chaos.yaml").write_text(OWN_SCENARIO.format(name="my-scenario"))
    (pytester.path / "top.chaos.yaml").write_text(OWN_SCENARIO.format(name="top-scenario"))


def _collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", *args)
    return sorted(line.rsplit("::", 1)[1] for line in result.outlines if "::" in line)


@pytest.mark.parametrize(
    ("testpaths", "own"),
    [(True, ["my-scenario"]), (False, ["my-scenario", "top-scenario"])],
    ids=["testpaths", "no-testpaths"],
)
def test_no_paths_collects_the_catalog_and_the_repos_scenarios_only(
    pytester: pytest.Pytester, testpaths: bool, own: list[str]
) -> None:
    """Scenarios are found where pytest looks without paths: ``testpaths``, else the current folder."""
    _trainer_repo(pytester, testpaths=testpaths)
    assert _collected(pytester, "--rollout-chaos") == sorted([*BUILTIN, *own])
    assert len(BUILTIN) >= 16


def test_the_repos_scenario_runs_and_its_tests_do_not(pytester: pytest.Pytester) -> None:
    _trainer_repo(pytester, testpaths=True)
    result = pytester.runpytest("--rollout-chaos", "-k", "my-scenario", "-s")
    result.assert_outcomes(passed=1, deselected=len(BUILTIN))
    result.stdout.fnmatch_lines(
        [
            "rollout-chaos: no paths given: collecting the built-in catalog (*) and the *.chaos.yaml "
            "files under tests; other tests are left out (name paths to run them)",
            "*RAN my-scenario*",
        ]
    )
    result.stdout.no_fnmatch_line("*test_trainer*")


def test_named_paths_or_the_ini_switch_run_the_repos_tests_as_usual(pytester: pytest.Pytester) -> None:
    _trainer_repo(pytester, testpaths=True)
    expected = ["my-scenario", "test_needs_a_gpu", "test_trainer_math"]
    assert _collected(pytester, "--rollout-chaos", "tests") == expected
    assert _collected(pytester, "--rollout-chaos", "-o", "rollout_chaos_catalog=false") == expected
    named = pytester.runpytest("--rollout-chaos", "tests")
    named.assert_outcomes(passed=3)
    named.stdout.no_fnmatch_line("*no paths given*")


# The trainer's collector factory, next to where pytest is started (the runner here never calls it).
CHAOS_MODULE = """
def make_collector(ctx):
    raise AssertionError("not called by this test")
"""


def test_a_module_target_is_found_from_where_pytest_started_wherever_the_scenario_lies(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """pytest takes its rootdir and ini from the paths it is given: a scenario file outside the
    repository leaves the repository's ``pythonpath`` unread, and the ``pytest`` script (unlike
    ``python -m pytest``) puts no folder on sys.path. The target is found all the same.

    The child is started by hand: pytester's own would have the current folder on PYTHONPATH."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    pytester.makepyfile(chaos=CHAOS_MODULE)
    scenario = tmp_path_factory.mktemp("elsewhere") / "elsewhere.chaos.yaml"
    scenario.write_text(OWN_SCENARIO.format(name="elsewhere"))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"]
    command += ["--rollout-chaos", "--rollout-chaos-target=chaos:make_collector", str(scenario)]
    # PYTHONSAFEPATH: as the pytest script, the current folder is not put first on sys.path
    env = {**os.environ, "PYTHONPATH": str(bundled.import_root()), "PYTHONSAFEPATH": "1"}
    child = subprocess.run(
        command, cwd=pytester.path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert child.returncode == pytest.ExitCode.OK, child.stdout + child.stderr
    assert "elsewhere.chaos.yaml::elsewhere" in child.stdout
