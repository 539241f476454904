"""Each side of the gate names its trainer commit and the versions that ran it; a difference is flagged."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rollout_chaos.collector.adapters import gym_client
from pytest_rollout_chaos.gate import render
from pytest_rollout_chaos.gate.compare import GateDecision, compare
from pytest_rollout_chaos.gate.environment import (
    PACKAGES,
    SideEnvironment,
    differences,
    probe,
    python_fit,
    tree_commit,
)
from pytest_rollout_chaos.gate.sides import SideRun
from pytest_rollout_chaos.gate.verdicts import ScenarioVerdicts

GIT = shutil.which("git")


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_the_versions_are_read_in_the_sides_interpreter(tmp_path: Path) -> None:
    env = probe(sys.executable, tmp_path, tmp_path)
    assert env.error is None, env.error
    assert env.versions["python"] == platform.python_version()
    assert {name: env.versions[name] for name in PACKAGES} == {name: installed(name) for name in PACKAGES}
    assert env.versions["pytest-rollout-chaos"] == installed("pytest-rollout-chaos")
    assert env.tree == tmp_path.name
    assert env.commit is None


def test_an_interpreter_that_cannot_run_the_probe_says_why(tmp_path: Path) -> None:
    env = probe(str(tmp_path / "no-python"), tmp_path, tmp_path)
    assert env.error is not None
    assert "no-python" in env.error
    assert env.describe().startswith("versions unknown")


@pytest.fixture
def repository(tmp_path: Path) -> tuple[Path, str]:
    if GIT is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "trainer"
    repo.mkdir()
    (repo / "trainer.py").write_text("X = 1\n")
    git = [GIT, "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True, timeout=30)
    subprocess.run([*git, "add", "."], check=True, timeout=30)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True, timeout=30)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, timeout=30, capture_output=True, text=True)
    return repo, head.stdout.strip()


def test_the_commit_of_a_checkout_and_of_its_git_archive(
    repository: tuple[Path, str], tmp_path: Path
) -> None:
    repo, commit = repository
    archive = tmp_path / "trainer-abc.tar.gz"
    subprocess.run(
        [str(GIT), "-C", str(repo), "archive", "--prefix=trainer-abc/", "-o", str(archive), "HEAD"],
        check=True,
        timeout=30,
    )
    assert tree_commit(repo) == commit
    assert tree_commit(archive) == commit
    plain = tmp_path / "plain"
    plain.mkdir()
    assert tree_commit(plain) is None
    assert probe(sys.executable, archive, repo).trainer() == f"trainer-abc @ {commit}"


def side(label: str, tmp_path: Path, transformers: str) -> SideRun:
    versions = {
        "python": "3.11.7",
        "torch": "2.13.0",
        "transformers": transformers,
        "vllm": None,
        "ray": "2.60.0",
    }
    env = SideEnvironment(f"verl-{label}", f"{label}0000", "/venv/bin/python", versions)
    return SideRun(label, tmp_path / f"verl-{label}", wall_s=10, environment=env)


def decision_and_sides(tmp_path: Path, head_transformers: str) -> tuple[GateDecision, SideRun, SideRun]:
    verdicts = {"baseline": ScenarioVerdicts("baseline", "passed", {}, "", None)}
    return (
        compare(verdicts, verdicts, []),
        side("base", tmp_path, "4.57.1"),
        side("head", tmp_path, head_transformers),
    )


def test_a_side_in_another_environment_is_flagged_in_every_output(tmp_path: Path) -> None:
    decision, base, head = decision_and_sides(tmp_path, "5.5.4")
    assert base.environment is not None
    assert head.environment is not None
    assert differences(base.environment, head.environment) == ["transformers: base 4.57.1, head 5.5.4"]
    text = render.text(decision, base, head)
    assert "  trainer verl-base @ base0000" in text
    assert "python 3.11.7, torch 2.13.0, transformers 4.57.1, vllm not installed, ray 2.60.0" in text
    assert "ENVIRONMENTS DIFFER" in text
    assert "  transformers: base 4.57.1, head 5.5.4" in text
    comment = render.markdown(decision, base, head, "verl")
    assert "| trainer | `verl-base @ base0000` | `verl-head @ head0000` |" in comment
    assert "| transformers ⚠️ | 4.57.1 | 5.5.4 |" in comment
    assert "| torch | 2.13.0 | 2.13.0 |" in comment
    document = json.loads(render.as_json(decision, base, head, target="verl", seed=0, scenarios=[]))
    assert document["environments_differ"] == ["transformers: base 4.57.1, head 5.5.4"]
    assert document["head"]["environment"]["versions"]["transformers"] == "5.5.4"
    assert document["base"]["environment"]["trainer"] == {"tree": "verl-base", "commit": "base0000"}


def test_a_python_mismatch_the_gate_ran_anyway_is_told_in_every_output(tmp_path: Path) -> None:
    decision, base, head = decision_and_sides(tmp_path, "4.57.1")
    assert head.environment is not None
    warning = "the head side (verl): verl-head's pyproject.toml says requires-python '>=3.11.8', ..."
    head.environment = dataclasses.replace(
        head.environment, requires_python=">=3.11.8", python_from="--head-python", python_warning=warning
    )
    text = render.text(decision, base, head)
    assert "  /venv/bin/python (--head-python)\n" in text
    assert f"  WARNING: {warning}" in text
    assert f"- ⚠️ {warning}" in render.markdown(decision, base, head, "verl")
    document = json.loads(render.as_json(decision, base, head, target="verl", seed=0, scenarios=[]))
    assert document["head"]["environment"]["python"] == {
        "version": "3.11.7",
        "requires_python": ">=3.11.8",
        "accepted": False,
        "mismatch": "patch",
        "from": "--head-python",
        "warning": warning,
    }
    assert document["base"]["environment"]["python"]["warning"] is None


def test_the_same_environment_is_not_flagged(tmp_path: Path) -> None:
    decision, base, head = decision_and_sides(tmp_path, "4.57.1")
    assert "DIFFER" not in render.text(decision, base, head)
    assert "⚠️" not in render.markdown(decision, base, head, "verl")
    document = json.loads(render.as_json(decision, base, head, target="verl", seed=0, scenarios=[]))
    assert document["environments_differ"] == []


def test_the_trees_requires_python_is_read_and_checked_against_the_sides_python(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\nrequires-python = ">=3.99"\n')
    refused = probe(sys.executable, tmp_path, tmp_path, python_from="--python")
    python = platform.python_version()
    minor = ".".join(python.split(".")[:2])
    assert refused.requires_python == ">=3.99"
    assert (refused.python_accepted(), refused.python_fit()) == (False, "minor")
    assert refused.python_mismatch() == (
        f"{tmp_path.name}'s pyproject.toml says requires-python '>=3.99', and "
        f"{refused.executable} (--python) is Python {python}: it accepts no {minor} release"
    )
    assert refused.to_json()["python"] == {
        "version": python,
        "requires_python": ">=3.99",
        "accepted": False,
        "mismatch": "minor",
        "from": "--python",
        "warning": None,
    }
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "t"\nrequires-python = ">{python}"\n')
    patch = probe(sys.executable, tmp_path, tmp_path)
    assert (patch.python_accepted(), patch.python_fit()) == (False, "patch")
    assert patch.python_mismatch() == (
        f"{tmp_path.name}'s pyproject.toml says requires-python '>{python}', and "
        f"{patch.executable} is Python {python}: a patch release it does not accept "
        f"(other {minor} releases it does)"
    )
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "t"\nrequires-python = "=={python}"\n')
    accepted = probe(sys.executable, tmp_path, tmp_path)
    assert (accepted.python_accepted(), accepted.python_fit(), accepted.python_mismatch()) == (
        True,
        "accepted",
        None,
    )
    assert accepted.to_json()["python"]["mismatch"] is None  # type: ignore[index]
    (tmp_path / "pyproject.toml").unlink()
    silent = probe(sys.executable, tmp_path, tmp_path)
    assert (silent.requires_python, silent.python_accepted(), silent.python_mismatch()) == (None, None, None)


@pytest.mark.parametrize(
    ("requires", "python", "fit"),
    [
        (">=3.13.13", "3.13.0", "patch"),  # NeMo RL before #3000, on a distribution's 3.13
        (">=3.13.14,<3.14", "3.13.0", "patch"),  # NeMo RL main
        (">=3.13.13", "3.13.13", "accepted"),
        (">=3.13.13", "3.11.7", "minor"),  # the trainers venv
        (">=3.12", "3.11.7", "minor"),  # NeMo RL's PR #2209 trees
        (">=3.12", "3.13.0", "accepted"),
        ("<3.13,>=3.10", "3.13.0", "minor"),  # verl 0.9.1
        ("<3.13,>=3.10", "3.11.7", "accepted"),
        ("!=3.13.0", "3.13.0", "patch"),
        ("==3.12.*", "3.13.0", "minor"),
        ("~=3.13.5", "3.13.1", "patch"),
        (">=3.13.0rc1", "3.13.0rc1", "accepted"),
        ("<3.13.2,>3.13.4", "3.13.3", "minor"),  # nothing at all
        ("not a specifier", "3.13.0", None),
        (">=3.12", "not a version", None),
        (None, "3.13.0", None),
    ],
)
def test_a_python_fits_a_requires_python_or_misses_a_patch_or_a_minor_version(
    requires: str | None, python: str, fit: str | None
) -> None:
    assert python_fit(requires, python) == fit


def test_each_side_says_what_plays_nemo_gyms_client() -> None:
    assert gym_client("nemo_rl").startswith("stand-in: the harness's GymClient")
    assert "RolloutCollectionHelper is not run" in gym_client("verl")
    assert gym_client("skyrl_skip_failed_rollouts").startswith("not used")
    assert gym_client("nemo_gym").startswith("NeMo Gym's own: nemo_gym.rollout_collection")
    assert gym_client("reference").startswith("stand-in: the harness's GymClient")
    assert gym_client("my_trainer.chaos:make_collector") == "the collector's own (not known to the gate)"
    env = SideEnvironment("t", None, sys.executable, {"nemo-gym": "0.4.0"}, gym_client=gym_client("slime"))
    assert env.to_json()["nemo_gym"] == {"version": "0.4.0", "client": gym_client("slime")}
