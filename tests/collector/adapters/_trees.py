"""The pinned upstream trees the adapters' tests drive: ``git archive`` tarballs, unpacked once.

They sit in ``tests/upstream`` (trimmed to what the adapters open; ``SOURCES.md`` there says where
each comes from), or in the folder ``ROLLOUT_CHAOS_UPSTREAM_DIR`` names. The plain project venv
lacks the trainers' dependencies: a test that needs them skips, saying which.
"""

from __future__ import annotations

import importlib.util
import os
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import pytest

REPO: Final = Path(__file__).resolve().parents[3]


def upstream_dir() -> Path:
    """``$ROLLOUT_CHAOS_UPSTREAM_DIR``, else the repository's ``tests/upstream``."""
    configured = os.environ.get("ROLLOUT_CHAOS_UPSTREAM_DIR")
    return Path(configured) if configured else REPO / "tests" / "upstream"


def missing_modules(modules: Sequence[str]) -> list[str]:
    """The modules of ``modules`` this interpreter cannot find."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def pinned_tree(name: str, into: Path, *, needs: Sequence[str], holds: str) -> Path:
    """Tarball ``name`` unpacked under ``into`` (once): the folder holding ``holds`` (a package path).

    Skip when this interpreter lacks a module of ``needs`` or the tarball is absent.
    """
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
