"""A hook server per module, and one per test for effects that end the process."""

from __future__ import annotations

from tests.faults._hooked import hooked, own_hooked  # noqa: F401 - fixtures shared with tests/faults
