"""``rollout-chaos`` as users run it: a real subprocess of the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled, cli
from pytest_rollout_chaos.scenario import load_scenario
from pytest_rollout_chaos.scenario.schema import scenario_schema
from tests.scenario._broken import MANY, many_problems

DATA = Path(__file__).parent / "scenario" / "data"
SCRIPT = Path(sys.executable).with_name("rollout-chaos")
BROKEN = (
    "name: broken\ndescription: d\nfaults:\n  - kind: latncy\n    target: x\nexpect:\n  invariants: [nope]\n"
)


def run(*args: str, cwd: Path, columns: int = 100) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, on a terminal ``columns`` wide (``COLUMNS``)."""
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "pytest_rollout_chaos.cli"]
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Two good scenarios and one broken one, as ``*.chaos.yaml``."""
    for name in ("agent_oom", "nan_logprobs"):
        shutil.copy(DATA / f"{name}.yaml", tmp_path / f"{name}.chaos.yaml")
    (tmp_path / "broken.chaos.yaml").write_text(BROKEN)
    return tmp_path


def test_help_names_every_command(tmp_path: Path) -> None:
    result = run("--help", cwd=tmp_path)
    assert result.returncode == 0
    for command in ("validate", "list", "new", "schema"):
        assert command in result.stdout
    assert "pytest --rollout-chaos" in result.stdout


@pytest.mark.parametrize(
    ("command", "description"),
    [
        ("validate", cli.VALIDATE_DESCRIPTION),
        ("list", cli.LIST_DESCRIPTION),
        ("new", cli.NEW_DESCRIPTION),
        ("schema", cli.SCHEMA_DESCRIPTION),
    ],
)
def test_each_command_has_help_of_its_own(tmp_path: Path, command: str, description: str) -> None:
    result = run(command, "--help", cwd=tmp_path, columns=1000)
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: rollout-chaos {command}")
    assert description in result.stdout
    assert cli.DESCRIPTION not in result.stdout


def test_validate_good_files_exits_0(folder: Path) -> None:
    result = run("validate", "agent_oom.chaos.yaml", "nan_logprobs.chaos.yaml", cwd=folder)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == "2 file(s) checked, 0 with problems\n"


def test_validate_checks_policy_replicas_against_the_count_given(tmp_path: Path) -> None:
    (tmp_path / "kill.chaos.yaml").write_text(
        "name: kill\ndescription: d\nfaults:\n  - {kind: kill, target: 'policy[1]'}\n"
        "expect:\n  invariants: [accounted]\n"
    )
    refused = run("validate", "kill.chaos.yaml", cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stdout.startswith(
        "kill.chaos.yaml:4: faults[0].target: 'policy[1]' is not a replica the stack runs: it runs 1 "
    )
    accepted = run("validate", "--policy-replicas=2", "kill.chaos.yaml", cwd=tmp_path)
    assert (accepted.returncode, accepted.stdout) == (0, "")
    bad = run("validate", "--policy-replicas=0", "kill.chaos.yaml", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--policy-replicas: invalid value '0' (valid: a whole number >= 1)" in bad.stderr


def test_validate_prints_one_line_per_problem_and_exits_1(folder: Path) -> None:
    result = run("validate", ".", cwd=folder)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        "broken.chaos.yaml:4: faults[0].kind: unknown fault kind 'latncy'; did you mean 'latency'? (valid: "
    )
    assert lines[1].startswith("broken.chaos.yaml:7: expect.invariants[0]: unknown invariant 'nope' (valid: ")
    assert result.stderr == "3 file(s) checked, 1 with problems\n"


def test_one_validate_run_shows_every_problem_of_a_file_at_its_line(tmp_path: Path) -> None:
    # Rules between fields (rows vs the workload, targets vs the stack, raises vs rollouts) are
    # reported together with the field rules, not only once those are fixed.
    (tmp_path / "many.chaos.yaml").write_text(MANY)
    result = run("validate", "many.chaos.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == many_problems("many.chaos.yaml")
    assert result.stderr == "1 file(s) checked, 1 with problems\n"


def test_validate_a_missing_file(tmp_path: Path) -> None:
    result = run("validate", "absent.chaos.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("absent.chaos.yaml:1: (file): cannot read: ")


def test_validate_without_files_is_a_usage_error(tmp_path: Path) -> None:
    result = run("validate", cwd=tmp_path)
    assert result.returncode == 2
    assert "the following arguments are required: FILE" in result.stderr


def test_list_shows_name_tags_and_description(folder: Path) -> None:
    result = run("list", "--no-builtin", ".", cwd=folder, columns=1000)
    assert result.returncode == 1  # the broken file
    assert "broken.chaos.yaml: 2 problem(s); see rollout-chaos validate" in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == ". (2 scenario(s))"
    assert lines[1].split()[:2] == ["agent-oom-mid-collection", "process,hard_failure"]
    assert lines[1].endswith("instead of returning fewer rollouts than rows.")
    assert lines[2].split()[:2] == ["nan-logprobs-null", "semantic"]


@pytest.mark.parametrize("columns", [72, 50])
def test_list_wraps_descriptions_to_the_terminal(columns: int, tmp_path: Path) -> None:
    wide = run("list", cwd=tmp_path, columns=1000).stdout.splitlines()
    narrow = run("list", cwd=tmp_path, columns=columns).stdout.splitlines()
    names = {line.split()[0] for line in wide[1:]}
    # only a name and its tags, which cannot be wrapped, may be wider than the terminal
    too_wide = [line for line in narrow[1:] if len(line) > columns]
    assert [line for line in too_wide if len(line.split()) != 2 or line.split()[0] not in names] == []
    assert " ".join(" ".join(narrow).split()) == " ".join(" ".join(wide).split())  # every word, in order
    assert len(narrow) > len(wide)


def test_list_includes_the_builtin_catalog(tmp_path: Path) -> None:
    result = run("list", cwd=tmp_path)
    catalog = bundled.catalog_dir()
    count = len(list(catalog.rglob("*.chaos.yaml")))
    assert result.stdout.splitlines()[0] == f"{catalog} ({count} scenario(s))"


def test_new_writes_a_valid_commented_file_and_never_overwrites(tmp_path: Path) -> None:
    result = run("new", "my-case", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "my-case.chaos.yaml\n")
    written = tmp_path / "my-case.chaos.yaml"
    assert load_scenario(written).name == "my-case"
    assert written.read_text().startswith("# A rollout-chaos scenario")
    before = written.read_text()
    again = run("new", "my-case", cwd=tmp_path)
    assert again.returncode == 1
    assert again.stderr == "rollout-chaos new: my-case.chaos.yaml exists; not overwriting it\n"
    assert written.read_text() == before
    assert run("validate", "my-case.chaos.yaml", cwd=tmp_path).returncode == 0


def test_new_refuses_a_bad_name(tmp_path: Path) -> None:
    result = run("new", "Bad Name", cwd=tmp_path)
    assert result.returncode == 1
    assert "invalid name 'Bad Name' (valid: lowercase letters, digits, - and _)" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_schema_prints_the_json_schema(tmp_path: Path) -> None:
    result = run("schema", cwd=tmp_path)
    assert result.returncode == 0
    assert json.loads(result.stdout) == scenario_schema()
