"""Where the data that ships with the plugin lives: the tiny model and the built-in catalog.

In a wheel they sit inside the package (``_bundled/``); in a source checkout or an editable
install they are the repository's top-level ``fixtures/`` and ``scenarios/`` folders.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_REPO_DIR = _PACKAGE_DIR.parent
_SCENARIO_SUFFIX = ".chaos.yaml"  # the scenario format's (``scenario.model.SUFFIX``, a layer up)


def tiny_model_dir() -> Path:
    """The bundled tiny Llama model directory (HF layout)."""
    return _first_existing(_PACKAGE_DIR / "_bundled" / "tiny-llama", _REPO_DIR / "fixtures" / "tiny-llama")


def catalog_dir() -> Path:
    """The folder of built-in ``*.chaos.yaml`` scenarios."""
    return _first_existing(_PACKAGE_DIR / "_bundled" / "scenarios", _REPO_DIR / "scenarios")


def catalog_files() -> dict[str, Path]:
    """The built-in scenarios by name, in name order (each catalog file is named after its scenario)."""
    paths = catalog_dir().glob(f"*{_SCENARIO_SUFFIX}")
    return dict(sorted((path.name.removesuffix(_SCENARIO_SUFFIX), path) for path in paths))


def import_root() -> Path:
    """The folder this package is imported from (the one holding ``pytest_rollout_chaos/``)."""
    return _REPO_DIR


def fixtures_dir() -> Path:
    """The repository's data folder (datasets, known-bug collectors); source checkouts only."""
    return _REPO_DIR / "fixtures"


def _first_existing(*candidates: Path) -> Path:
    for candidate in candidates:
        if candidate.exists():
            return candidate
    return candidates[-1]
