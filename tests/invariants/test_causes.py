"""``causes``: what the History records as one row's failure, and the words an error must share with
it."""

from __future__ import annotations

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.causes import row_causes, significant, timeout_named

RUN = {"link": "collector->agent:calculator_agent", "server": "calculator_agent", "row": 1}


def test_row_causes_and_words() -> None:
    history = History()
    history.append("agent", "info", "hook", {**RUN, "effect": "delay", "rule": "r2"})  # a delay is no failure
    history.append("agent", "ok", "POST /run", {**RUN, "status": 200})
    assert row_causes(history.events(), 1) == []
    assert significant("HTTP 500 from http://127.0.0.1:9/run: Internal Server Error") == set()
    assert timeout_named("deadline of 30 seconds passed")
    assert not timeout_named("row 3 timed out")
