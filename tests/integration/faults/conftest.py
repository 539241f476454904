"""A hook server per module, one per test for effects that end the process, and a bare fault
layer per module for upstreams served on the test's own loop."""

from __future__ import annotations

from tests.faults._hooked import hooked, own_hooked  # noqa: F401 - fixtures shared with tests/faults
from tests.integration.faults._layer_rig import fault_layer  # noqa: F401 - a layer per module
