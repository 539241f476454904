"""What ran each side of the gate: the trainer tree (its name and commit) and the packages' versions.

A verdict can depend on the environment as much as on the tree (the verl recipe's fallback breaks
on transformers 5 and not on 4), so the gate says, per side, which trainer commit it ran and the
versions of Python, torch, transformers, vllm and ray in that side's interpreter, read there (a
child process of ``--python`` with the tree first on its path, as the side's pytest has it), and
flags every one that differs between the sides.

The commit of a tree is read from a git checkout (``git rev-parse HEAD``) or from a ``git archive``
tarball, whose pax header holds the commit it was made from; a plain folder has none, and its
name stands for it.

Each side also says which Python the tree accepts (its ``pyproject.toml``'s ``requires-python``,
when the tree has one) and whether the side's interpreter is among them, the NeMo Gym version
installed there, and what plays NeMo Gym's client for the target (``adapters.gym_client``): NeMo Gym's own,
or the harness's ``GymClient`` standing in for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from packaging.specifiers import InvalidSpecifier, SpecifierSet

PACKAGES: Final = ("torch", "transformers", "vllm", "ray", "nemo-gym")
"""The distributions whose version every side reports (besides Python and this plugin)."""
PROBE_S: Final = 120.0
GIT_S: Final = 30.0
NOT_INSTALLED: Final = "not installed"
# Runs in the side's interpreter; prints one JSON object. Nothing is imported but the stdlib.
PROBE: Final = """
import importlib.metadata as metadata, json, platform, sys
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
found = {"python": platform.python_version(), "executable": sys.executable}
found.update({name: version(name) for name in sys.argv[1:]})
print(json.dumps(found))
"""


@dataclass(frozen=True, slots=True)
class SideEnvironment:
    """One side's trainer tree and the versions that ran it (``None``: not installed there)."""

    tree: str  # the tree's name: its folder, or the archive's
    commit: str | None
    executable: str
    versions: Mapping[str, str | None] = field(default_factory=dict)  # python, torch, ..., plugin
    error: str | None = None  # why the versions could not be read
    requires_python: str | None = None  # the tree's pyproject.toml says; None: it says nothing
    gym_client: str = ""  # what plays NeMo Gym's client for the side's target

    def python_accepted(self) -> bool | None:
        """Whether the tree's ``requires-python`` admits the side's Python; None when either is unknown."""
        python = self.versions.get("python")
        if self.requires_python is None or python is None:
            return None
        try:
            return SpecifierSet(self.requires_python).contains(python, prereleases=True)
        except InvalidSpecifier:
            return None

    def python_refused(self) -> str | None:
        """Why the tree refuses the side's interpreter, or None when it does not."""
        if self.python_accepted() is not False:
            return None
        return (
            f"{self.tree}'s pyproject.toml says requires-python {self.requires_python!r}, and "
            f"{self.executable} is Python {self.versions.get('python')}"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "trainer": {"tree": self.tree, "commit": self.commit},
            "python_executable": self.executable,
            "python": {
                "version": self.versions.get("python"),
                "requires_python": self.requires_python,
                "accepted": self.python_accepted(),
            },
            "nemo_gym": {"version": self.versions.get("nemo-gym"), "client": self.gym_client},
            "versions": dict(self.versions),
            "error": self.error,
        }

    def trainer(self) -> str:
        """``nemo-rl-3eebe4da @ 3eebe4da2631...``, or the tree's name alone."""
        return f"{self.tree} @ {self.commit}" if self.commit else f"{self.tree} (commit unknown)"

    def describe(self) -> str:
        """``python 3.11.7, torch 2.13.0, transformers 5.5.4, vllm not installed, ray 2.60.0``."""
        if self.error is not None:
            return f"versions unknown ({self.error})"
        return ", ".join(f"{name} {version or NOT_INSTALLED}" for name, version in self.versions.items())


def tree_commit(path: Path) -> str | None:
    """The commit a tree was made from: a checkout's ``HEAD``, a ``git archive``'s header; else None."""
    if path.is_dir():
        if not (path / ".git").exists():
            return None
        try:
            done = subprocess.run(
                ["git", "-C", str(path), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=GIT_S,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() or None
    try:
        with tarfile.open(path) as archive:
            comment = archive.pax_headers.get("comment", "")
    except (tarfile.TarError, OSError):
        return None
    return comment.strip() or None


def tree_name(path: Path) -> str:
    """A tree's name: its folder's, or its archive's without the suffix."""
    name = path.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def requires_python(tree: Path) -> str | None:
    """The ``requires-python`` of ``tree``'s ``pyproject.toml``; None when it has none."""
    try:
        project = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    value = project.get("requires-python") if isinstance(project, dict) else None
    return value if isinstance(value, str) else None


def probe(python: str, given: Path, tree: Path, *, gym_client: str = "") -> SideEnvironment:
    """The side's environment, read in ``python`` with ``tree`` (``given`` unpacked) first on its path."""
    name, commit = tree_name(given), tree_commit(given)
    accepts = requires_python(tree)
    inherited = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(part for part in (str(tree), inherited) if part)}
    try:
        done = subprocess.run(
            [python, "-c", PROBE, *PACKAGES, "pytest-rollout-chaos"],
            capture_output=True,
            text=True,
            timeout=PROBE_S,
            check=True,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        return SideEnvironment(
            name,
            commit,
            python,
            error=f"{python}: {detail.strip()[-300:]}",
            requires_python=accepts,
            gym_client=gym_client,
        )
    versions = {"python": found["python"], **{package: found.get(package) for package in PACKAGES}}
    versions["pytest-rollout-chaos"] = found.get("pytest-rollout-chaos")
    return SideEnvironment(
        name,
        commit,
        str(found.get("executable") or python),
        versions,
        requires_python=accepts,
        gym_client=gym_client,
    )


def differences(base: SideEnvironment, head: SideEnvironment) -> list[str]:
    """Each version that differs between the sides: ``transformers: base 4.57.1, head 5.5.4``."""
    if base.error is not None or head.error is not None:
        unread = [side for side, env in (("base", base), ("head", head)) if env.error is not None]
        return [f"the environment of {' and '.join(unread)} could not be read, so it cannot be compared"]
    lines = []
    for name in dict.fromkeys([*base.versions, *head.versions]):
        ours, theirs = base.versions.get(name), head.versions.get(name)
        if ours != theirs:
            lines.append(f"{name}: base {ours or NOT_INSTALLED}, head {theirs or NOT_INSTALLED}")
    return lines
