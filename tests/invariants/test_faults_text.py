"""The fault sentence every FAIL summary carries names each fault and its target, and a restart
names its server, never "? on ?"."""

from __future__ import annotations

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import faults_text


def test_every_fault_event_names_its_fault_and_target_or_server() -> None:
    history = History()
    history.append("fault", "info", "inject", {"fault": "kill", "target": "calculator_agent"})
    history.append("fault", "info", "heal", {"fault": "kill", "target": "calculator_agent"})
    history.append("fault", "info", "restart", {"server": "calculator_agent", "port": 4100})
    text = faults_text(history)
    assert text.startswith("faults: inject kill on calculator_agent at t=")
    assert "; heal kill on calculator_agent at t=" in text
    assert "; restart of calculator_agent at t=" in text
    assert "?" not in text
