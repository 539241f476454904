"""The test tree mirrors the package, and a test helper is told apart by its name.

Unit tests of ``pytest_rollout_chaos/<subpackage>/...`` live in ``tests/<subpackage>/...`` (tests of
a top-level module, ``tests/test_<module>.py``); the suites that run the stack or the plugin as
a whole keep their own folders (``SUITES``). In ``tests/``, a Python file is a test module
(``test_*.py``), a ``conftest.py`` (fixtures), a package ``__init__.py``, or a helper that test
modules import, whose name starts with ``_``. Programs run as child processes sit in a
``programs/`` folder, the README's example code in ``examples/`` and the pinned upstream trees
with their trim script in ``upstream/``; all keep their names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

TESTS: Final = Path(__file__).resolve().parent
PACKAGE: Final = TESTS.parent / "pytest_rollout_chaos"
SUITES: Final = frozenset(
    {
        "benchmarks",
        "catalog",
        "ci",
        "docs",
        "examples",
        "gpu",
        "integration",
        "nemo_gym",
        "plugin",
        "programs",
        "reliability",
        "upstream",
    }
)
# folders whose files keep their own names (``upstream``: the pinned trainer trees and their trim script)
FREE_NAMES: Final = frozenset({"programs", "examples", "upstream"})
DATA: Final = "data"


def _python_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("*.py") if "__pycache__" not in path.parts)


def test_test_helpers_start_with_an_underscore() -> None:
    misnamed = [
        str(path.relative_to(TESTS.parent))
        for path in _python_files()
        if not (
            path.name.startswith(("test_", "_"))
            or path.name == "conftest.py"
            or FREE_NAMES & set(path.relative_to(TESTS).parts[:-1])
        )
    ]
    if misnamed:
        pytest.fail(
            "a test helper's name starts with '_' (test modules: test_*.py, fixtures: conftest.py):\n"
            + "\n".join(misnamed),
            pytrace=False,
        )


def test_unit_test_folders_mirror_the_package() -> None:
    stray = []
    for folder in sorted(path for path in TESTS.rglob("*") if path.is_dir() and path.name != "__pycache__"):
        parts = folder.relative_to(TESTS).parts
        if parts[0] in SUITES or DATA in parts:
            continue
        if not (PACKAGE.joinpath(*parts) / "__init__.py").is_file():
            stray.append(f"tests/{'/'.join(parts)}")
    if stray:
        pytest.fail(
            "unit-test folders name a subpackage of pytest_rollout_chaos (or join SUITES in "
            f"{Path(__file__).name}):\n" + "\n".join(stray),
            pytrace=False,
        )
