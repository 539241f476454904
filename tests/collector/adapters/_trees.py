"""The pinned upstream trees the adapters' tests drive: ``git archive`` tarballs, unpacked once.

They sit in ``tests/upstream`` (trimmed to what the adapters open; ``SOURCES.md`` there says where
each comes from), or in the folder ``ROLLOUT_CHAOS_UPSTREAM_DIR`` names. The plain project venv
lacks the trainers' dependencies: a test that needs them skips, saying which.

A test that runs a trainer's code runs on that trainer's interpreter only, found as
``rollout-chaos gate`` finds it: the one ``ROLLOUT_CHAOS_<TRAINER>_PYTHON`` names, else this one;
elsewhere it skips, saying where it runs. It skips too where the tree's ``requires-python`` takes
no release of this interpreter's minor version (a patch release it does not take runs, as under
the gate). So each test runs in one of CI's venvs, and a developer runs them with
``$ROLLOUT_CHAOS_NEMO_RL_PYTHON -m pytest tests/collector/adapters/test_nemo_rl_train.py``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import platform
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import pytest

from pytest_rollout_chaos import targets
from pytest_rollout_chaos.gate.environment import python_fit

REPO: Final = Path(__file__).resolve().parents[3]


def upstream_dir() -> Path:
    """``$ROLLOUT_CHAOS_UPSTREAM_DIR``, else the repository's ``tests/upstream``."""
    configured = os.environ.get("ROLLOUT_CHAOS_UPSTREAM_DIR")
    return Path(configured) if configured else REPO / "tests" / "upstream"


def missing_modules(modules: Sequence[str]) -> list[str]:
    """The modules of ``modules`` this interpreter cannot find."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


@functools.cache
def _prefix(python: str) -> str | None:
    """``python``'s ``sys.prefix`` (its venv), resolved; None when it does not run."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.prefix)"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(done.stdout.strip())


def archived_requires_python(tarball: Path) -> str | None:
    """The ``requires-python`` of the ``pyproject.toml`` at the top of ``tarball``'s tree; None
    when it has none."""
    name = tarball.name.removesuffix(".tar.gz")
    try:
        with tarfile.open(tarball) as archive:
            member = archive.extractfile(f"{name}/pyproject.toml")
            project = tomllib.loads(member.read().decode()).get("project", {}) if member else {}
    except (KeyError, OSError, tarfile.TarError, tomllib.TOMLDecodeError):
        return None
    value = project.get("requires-python")
    return value if isinstance(value, str) else None


def wrong_python(trainer: str, tree: str, requires: str | None) -> str | None:
    """Why ``trainer``'s code (tree ``tree``, its ``requires-python`` ``requires``) does not run
    on this interpreter, or None when it does."""
    variable = targets.python_env(trainer)
    if variable is None:
        raise ValueError(f"{trainer!r}: no built-in adapter's trainer (valid: {', '.join(targets.TRAINERS)})")
    named = os.environ.get(variable)
    if named and _prefix(named) != os.path.realpath(sys.prefix):
        return f"{tree}: {trainer}'s tests run on {variable}={named}, not on {sys.executable}"
    version = platform.python_version()
    if python_fit(requires, version) == "minor":
        return (
            f"{tree}: its requires-python {requires!r} takes no release of Python {version} "
            f"({sys.executable}); run it on one it takes, named by {variable} as for rollout-chaos "
            f"gate: ${variable} -m pytest ..."
        )
    return None


def pinned_tree(
    name: str, into: Path, *, needs: Sequence[str], holds: str, trainer: str | None = None
) -> Path:
    """Tarball ``name`` unpacked under ``into`` (once): the folder holding ``holds`` (a package path).

    Skip when this interpreter lacks a module of ``needs`` or the tarball is absent, or, for a
    test that runs ``trainer``'s code, when this is not the trainer's interpreter (``wrong_python``).
    """
    if trainer is not None:
        tarball = upstream_dir() / f"{name}.tar.gz"
        why = wrong_python(trainer, name, archived_requires_python(tarball) if tarball.is_file() else None)
        if why is not None:
            pytest.skip(why)
    missing = missing_modules(needs)
    if missing:
        pytest.skip(
            f"{name}: the trainer's dependencies are not installed here (missing: {', '.join(missing)})"
        )
    tarball = upstream_dir() / f"{name}.tar.gz"
    if not tarball.is_file():
        pytest.skip(
            f"no {tarball.name} in {tarball.parent} (ROLLOUT_CHAOS_UPSTREAM_DIR names another folder)"
        )
    tree = into / name
    if not tree.is_dir():
        partial = into / f"{name}.partial"
        with tarfile.open(tarball) as archive:
            archive.extractall(partial, filter="data")
        (partial / name).rename(tree)
    if not (tree / holds).exists():
        raise AssertionError(f"{tarball} did not unpack to a folder holding {holds} ({tree})")
    return tree
