"""What the layer's main process tells its workers: whether the state is quiet, the routes
``prefix_drift`` rules watch, each change once, and only once told."""

from __future__ import annotations

import asyncio

import pytest

from pytest_rollout_chaos.servers.faultlayer.state import LayerState, Link, Summary


@pytest.mark.asyncio
async def test_settle_tells_each_change_once_and_returns_once_it_is_known() -> None:
    state = LayerState()
    state.links["client->policy"] = Link("client->policy", "policy", "policy", "http://127.0.0.1:1")
    told: list[Summary] = []

    async def on_change(summary: Summary) -> None:
        await asyncio.sleep(0.01)  # the workers answer later
        told.append(summary)

    state.on_change = on_change
    assert state.settled(), "no rule, no row: quiet, as the workers start"
    rule = state.arm({"server": "policy", "effect": "prefix_drift", "match": {"route": "/tokenize"}})
    assert not state.settled()
    await asyncio.gather(state.settle(), state.settle())
    assert told == [(False, (("policy", "/tokenize"),))], "told once, however many wait for it"
    assert state.settled()

    state.disarm(rule.id)
    await state.settle()
    assert told[-1] == (True, ())
    state.rows.register({"_rowidx": 0, "responses_create_params": {"input": "What is two plus two?"}})
    await state.settle()
    assert told[-1] == (False, ()), "a row known ends the quiet too"
    state.rows.clear()
    await state.settle()
    assert told[-1] == (True, ())
    assert len(told) == 4


def test_without_workers_the_state_is_always_settled() -> None:
    state = LayerState()
    state.rows.register({"_rowidx": 0, "responses_create_params": {"input": "What is two plus two?"}})
    assert not state.quiet()
    assert state.settled()
