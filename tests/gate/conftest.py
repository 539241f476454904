"""The gate's tests keep what their gates leave inside their own temporary folders."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def gate_scratch_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gate that fails or cannot judge keeps its trees and logs in its scratch folder (made by
    ``tempfile.mkdtemp``) for its user to read; under test, that folder is made in the test's
    ``tmp_path``, which pytest clears in its turn, not in the machine's ``/tmp``."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
