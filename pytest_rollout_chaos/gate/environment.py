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
when the tree has one) and how the side's interpreter fits it (``python_fit``: accepted, a patch
release it does not accept, or a minor version it does not accept at all), where that interpreter
was named, the NeMo Gym version installed there, and what plays NeMo Gym's client for the target
(``adapters.gym_client``): NeMo Gym's own, or the harness's ``GymClient`` standing in for it.
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
from typing import Final, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

PACKAGES: Final = ("torch", "transformers", "vllm", "ray", "nemo-gym")
"""The distributions whose version every side reports (besides Python and this plugin)."""
PROBE_S: Final = 120.0
GIT_S: Final = 30.0
NOT_INSTALLED: Final = "not installed"
Fit = Literal["accepted", "patch", "minor"]
"""How an interpreter meets a tree's ``requires-python``: ``accepted``; ``patch``: not this patch
release, but others of its minor version (3.13.0 against ``>=3.13.13``); ``minor``: no release of
its minor version (3.11 against ``>=3.12``)."""
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
    python_from: str = ""  # who named the interpreter: an option, an environment variable, or none
    python_warning: str | None = None  # a mismatch the gate ran anyway, as it told it

    def python_accepted(self) -> bool | None:
        """Whether the tree's ``requires-python`` admits the side's Python; None when either is unknown."""
        fit = self.python_fit()
        return None if fit is None else fit == "accepted"

    def python_fit(self) -> Fit | None:
        """How the side's Python meets the tree's ``requires-python``; None when either is unknown."""
        return python_fit(self.requires_python, self.versions.get("python"))

    def python_mismatch(self) -> str | None:
        """The tree's ``requires-python`` against the side's interpreter, when it does not accept it."""
        fit = self.python_fit()
        if fit is None or fit == "accepted":
            return None
        python = str(self.versions.get("python"))
        named = f" ({self.python_from})" if self.python_from else ""
        said = (
            f"{self.tree}'s pyproject.toml says requires-python {self.requires_python!r}, and "
            f"{self.executable}{named} is Python {python}"
        )
        minor = ".".join(python.split(".")[:2])
        if fit == "patch":
            return f"{said}: a patch release it does not accept (other {minor} releases it does)"
        return f"{said}: it accepts no {minor} release"

    def to_json(self) -> dict[str, object]:
        fit = self.python_fit()
        return {
            "trainer": {"tree": self.tree, "commit": self.commit},
            "python_executable": self.executable,
            "python": {
                "version": self.versions.get("python"),
                "requires_python": self.requires_python,
                "accepted": self.python_accepted(),
                "mismatch": None if fit == "accepted" else fit,
                "from": self.python_from,
                "warning": self.python_warning,
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


def python_fit(requires: str | None, python: str | None) -> Fit | None:
    """How Python ``python`` meets ``requires`` (a ``requires-python``); None when either is
    unknown or unreadable. Another patch release is looked for at each patch number the
    specifiers name (and the ones beside it), where acceptance can change."""
    if requires is None or python is None:
        return None
    try:
        specifiers, version = SpecifierSet(requires), Version(python)
    except (InvalidSpecifier, InvalidVersion):
        return None
    if specifiers.contains(version, prereleases=True):
        return "accepted"
    major, minor = (*version.release, 0)[:2]
    patches = {0, 10**6}
    for specifier in specifiers:
        try:
            release = Version(specifier.version.removesuffix(".*")).release
        except InvalidVersion:
            continue
        if release[:2] == (major, minor):
            named = (*release, 0, 0)[2]
            patches |= {max(named - 1, 0), named, named + 1}
    if any(specifiers.contains(f"{major}.{minor}.{patch}", prereleases=True) for patch in patches):
        return "patch"
    return "minor"


def probe(
    python: str, given: Path, tree: Path, *, gym_client: str = "", python_from: str = ""
) -> SideEnvironment:
    """The side's environment, read in ``python`` (named by ``python_from``) with ``tree``
    (``given`` unpacked) first on its path."""
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
            python_from=python_from,
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
        python_from=python_from,
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
