"""The gate's tests keep what their gates leave inside their own temporary folders."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _gate_scratch(gate_scratch_in_tmp_path: None) -> None:
    """Every gate here makes its scratch folder in the test's ``tmp_path`` (``tests/conftest.py``)."""
