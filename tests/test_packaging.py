"""What ``pip install pytest-rollout-chaos`` brings: the core dependencies cover every import the
package makes at module level, the optional parts' packages sit in extras only, and the version
the package and ``rollout-chaos --version`` report is the project's."""

from __future__ import annotations

import ast
import email.parser
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import pytest_rollout_chaos
from pytest_rollout_chaos import extras
from pytest_rollout_chaos.version import UNKNOWN, read_version

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_rollout_chaos"
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS_ONLY = {"hypothesis", "docker", "toxiproxy-python", "numpy"}
# Import names that differ from their distribution's name.
DISTRIBUTION_OF = {"yaml": "pyyaml"}


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement line (``PyYAML>=6.0`` -> ``pyyaml``)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


CORE = {_name(requirement) for requirement in PYPROJECT["project"]["dependencies"]}
OPTIONAL: dict[str, set[str]] = {
    extra: {_name(requirement) for requirement in requirements}
    for extra, requirements in PYPROJECT["project"]["optional-dependencies"].items()
}


def test_the_core_dependencies_leave_the_optional_packages_to_extras() -> None:
    assert not CORE & EXTRAS_ONLY
    for extra in (extras.FUZZ, extras.DOCKER, extras.TOXIPROXY):
        assert OPTIONAL[extra.name] == {extra.distribution}
    assert {"hypothesis", "toxiproxy-python", "jsonschema", "pytest-xdist"} <= OPTIONAL["test"]


def test_every_module_level_import_is_a_core_dependency() -> None:
    """A module-level import of a third-party package runs whenever the module is imported, so its
    distribution must be a core dependency (or come with one, as multidict comes with aiohttp);
    optional packages are imported inside functions, or in a ``try`` that names the extra."""
    with_core = CORE | {
        _name(requirement)
        for distribution in CORE
        for requirement in metadata.requires(distribution) or ()
        if "extra ==" not in requirement
    }
    extra_modules = {extra.module for extra in (extras.FUZZ, extras.DOCKER, extras.TOXIPROXY)}
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for top, guarded in _module_level_imports(path):
            if top in sys.stdlib_module_names or top in ("pytest_rollout_chaos", "__future__"):
                continue
            if guarded and top in extra_modules:
                continue
            if DISTRIBUTION_OF.get(top, top.replace("_", "-")) not in with_core:
                wrong.append(f"{path.relative_to(ROOT)}: import {top}")
    assert wrong == []


def _module_level_imports(path: Path) -> list[tuple[str, bool]]:
    """``(top-level module, inside a try)`` for each import run when ``path`` is imported."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        guarded = isinstance(node, ast.Try)
        for statement in node.body if isinstance(node, ast.Try) else [node]:
            if isinstance(statement, ast.Import):
                found += [(alias.name.split(".")[0], guarded) for alias in statement.names]
            elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
                found.append((statement.module.split(".")[0], guarded))
    return found


def test_the_version_is_the_projects() -> None:
    assert pytest_rollout_chaos.__version__ == PYPROJECT["project"]["version"]
    script = Path(sys.executable).with_name("rollout-chaos")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pytest_rollout_chaos.cli"]
    result = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout == f"rollout-chaos {PYPROJECT['project']['version']}\n"


def test_a_source_tree_without_metadata_reads_its_pyproject(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    assert read_version("no-such-distribution", pyproject) == UNKNOWN  # no file
    pyproject.write_text('[project]\nname = "no-such-distribution"\nversion = "9.8.7"\n')
    assert read_version("no-such-distribution", pyproject) == "9.8.7"
    pyproject.write_text('[project]\nname = "another"\nversion = "9.8.7"\n')
    assert read_version("no-such-distribution", pyproject) == UNKNOWN


@pytest.mark.slow
def test_the_wheel_requires_no_optional_package(tmp_path: Path) -> None:
    """The wheel's METADATA: the optional packages appear only under their extras."""
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if build.returncode != 0 and "hatchling" in build.stderr:
        pytest.skip(f"pip could not get the build backend: {build.stderr.strip().splitlines()[-1]}")
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("pytest_rollout_chaos-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        fields = email.parser.Parser().parsestr(archive.read(name).decode())
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())
    unconditional = {_name(req) for req in fields.get_all("Requires-Dist") or () if "extra ==" not in req}
    assert unconditional == CORE
    assert not unconditional & EXTRAS_ONLY
    assert {"fuzz", "docker", "toxiproxy", "test"} <= set(fields.get_all("Provides-Extra") or ())
    assert fields["License-Expression"] == "Apache-2.0"
    assert "Operating System :: POSIX :: Linux" in (fields.get_all("Classifier") or ())
