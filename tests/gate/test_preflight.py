"""Each side's interpreter: named by an option, by its trainer's environment variable, or this one;
checked against the tree's ``requires-python`` before anything runs (a minor version it does not
accept is refused, a patch release runs with a warning), and said where it came from."""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import pytest

from pytest_rollout_chaos import cli
from pytest_rollout_chaos.gate import command, preflight

REPO = Path(__file__).resolve().parents[2]
BASELINE = str(REPO / "scenarios" / "baseline.chaos.yaml")
PYTHON = platform.python_version()
MINOR = ".".join(PYTHON.split(".")[:2])


def _args(*given: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return parser.parse_args(["--base", "b", "--head", "h", *given])


def test_an_option_wins_over_the_trainers_variable_which_wins_over_this_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ROLLOUT_CHAOS_NEMO_RL_PYTHON", raising=False)
    assert preflight.interpreter(_args("--target", "nemo_rl"), head=False) == (
        sys.executable,
        preflight.THIS_PYTHON,
    )
    monkeypatch.setenv("ROLLOUT_CHAOS_NEMO_RL_PYTHON", "/venvs/nemo-rl/bin/python")
    named = _args("--target", "nemo_rl")
    assert preflight.interpreter(named, head=False) == (
        "/venvs/nemo-rl/bin/python",
        "ROLLOUT_CHAOS_NEMO_RL_PYTHON",
    )
    assert preflight.interpreter(named, head=True) == (
        "/venvs/nemo-rl/bin/python",
        "ROLLOUT_CHAOS_NEMO_RL_PYTHON",
    )
    given = _args("--target", "nemo_rl", "--python", "/p", "--head-python", "/h")
    assert preflight.interpreter(given, head=False) == ("/p", "--python")
    assert preflight.interpreter(given, head=True) == ("/h", "--head-python")
    assert preflight.interpreter(_args("--target", "nemo_rl", "--python", "/p"), head=True) == (
        "/p",
        "--python",
    )
    # A collector of the user's own has no trainer the gate knows; another trainer has its own variable.
    assert preflight.interpreter(_args("--target", "mine:factory"), head=False)[1] == preflight.THIS_PYTHON
    monkeypatch.setenv("ROLLOUT_CHAOS_SKYRL_PYTHON", "/venvs/skyrl/bin/python")
    skyrl = _args("--target", "skyrl", "--head-target", "skyrl_skip_failed_rollouts")
    assert preflight.interpreter(skyrl, head=True) == (
        "/venvs/skyrl/bin/python",
        "ROLLOUT_CHAOS_SKYRL_PYTHON",
    )


def _trees(tmp_path: Path, requires: str) -> tuple[Path, Path]:
    base, head = tmp_path / "base", tmp_path / "head"
    for tree in (base, head):
        tree.mkdir()
        (tree / "pyproject.toml").write_text(f'[project]\nname = "t"\nrequires-python = "{requires}"\n')
    return base, head


def test_a_minor_version_the_tree_does_not_accept_is_refused_naming_what_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROLLOUT_CHAOS_NEMO_RL_PYTHON", sys.executable)
    base, head = _trees(tmp_path, ">=3.99")
    status = cli.main(["gate", "--target", "nemo_rl", "--base", str(base), "--head", str(head), BASELINE])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("rollout-chaos gate: the base side (nemo_rl): base's pyproject.toml says ")
    assert (
        f"requires-python '>=3.99', and {sys.executable} (ROLLOUT_CHAOS_NEMO_RL_PYTHON) is Python "
        f"{PYTHON}: it accepts no {MINOR} release, so its verdicts would be luck (valid: an interpreter "
        "the tree accepts, named by --python or ROLLOUT_CHAOS_NEMO_RL_PYTHON; or --ignore-requires-python "
        "to run it anyway)\n"
    ) in err
    assert "[base" not in err  # refused before anything ran


def test_a_variable_naming_no_usable_interpreter_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROLLOUT_CHAOS_VERL_PYTHON", str(tmp_path / "no-python"))
    base, head = _trees(tmp_path, ">=3.10")
    assert cli.main(["gate", "--target", "verl", "--base", str(base), "--head", str(head), BASELINE]) == 2
    err = capsys.readouterr().err
    assert (
        f"rollout-chaos gate: ROLLOUT_CHAOS_VERL_PYTHON={tmp_path / 'no-python'}: cannot import pytest" in err
    )


@pytest.mark.parametrize(
    ("requires", "flags", "why"),
    [
        (f">{PYTHON}", [], "the gate refuses only a minor version the tree does not accept"),
        (">=3.99", ["--ignore-requires-python"], "as --ignore-requires-python asks"),
    ],
)
def test_a_patch_release_or_an_ignored_mismatch_runs_with_a_warning(
    requires: str,
    flags: list[str],
    why: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The sides start (and at once meet their deadline: what they would judge is not the point)."""
    base, head = _trees(tmp_path, requires)
    arguments = [
        "gate",
        "--target",
        "mine:factory",
        "--base",
        str(base),
        "--head",
        str(head),
        "--timeout-s",
        "0",
    ]
    assert cli.main([*arguments, *flags, BASELINE]) == 2
    err = capsys.readouterr().err
    for label, tree in (("base", base), ("head", head)):
        assert (
            f"rollout-chaos gate: warning: the {label} side (mine:factory): {tree.name}'s pyproject.toml "
            f"says requires-python {requires!r}, and {sys.executable} ({preflight.THIS_PYTHON}) "
            f"is Python {PYTHON}"
        ) in err
    assert err.count(f"; run anyway ({why})\n") == 2
    assert "the base run" in err  # and the sides did start
