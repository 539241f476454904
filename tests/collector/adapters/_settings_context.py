"""A bare ``CollectorContext`` for the settings tests: an adapter's factory reads only the
scenario's ``trainer_config`` from it to build what it hands the trainer, so no stack, Gym or
policy stands behind it (the policy URL answers nothing)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, cast

from pytest_rollout_chaos.collector.protocol import CollectorContext, CollectorSettings
from pytest_rollout_chaos.history import History


def settings_context(**trainer_config: Any) -> CollectorContext:
    return CollectorContext(
        gym=cast(Any, None),
        policy="http://127.0.0.1:1/v1",
        env=None,
        tokenizer=None,
        settings=CollectorSettings(trainer_config=MappingProxyType(trainer_config)),
        history=History(),
        model="tiny",
    )
