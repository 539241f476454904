"""``--rollout-chaos-ray`` values: off, local[:N], hosts:N, an address; anything else says what is wrong."""

from __future__ import annotations

import re

import pytest

from pytest_rollout_chaos.ray.mode import MAX_HOSTS, MAX_LOCAL_NODES, OFF, RayMode, parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, OFF),
        ("off", OFF),
        ("local", RayMode("local", nodes=1)),
        ("local:3", RayMode("local", nodes=3)),
        (f"local:{MAX_LOCAL_NODES}", RayMode("local", nodes=MAX_LOCAL_NODES)),
        ("hosts:3", RayMode("hosts", nodes=3)),
        (f"hosts:{MAX_HOSTS}", RayMode("hosts", nodes=MAX_HOSTS)),
        ("127.0.0.1:6379", RayMode("address", address="127.0.0.1:6379")),
        ("head.cluster.internal:6379", RayMode("address", address="head.cluster.internal:6379")),
        ("[::1]:6379", RayMode("address", address="[::1]:6379")),
        ("auto", RayMode("address", address="auto")),
    ],
)
def test_valid_values(text: str | None, expected: RayMode) -> None:
    assert parse(text) == expected
    assert parse(text).on == (expected.kind != "off")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("local:0", "node count '0'"),
        (f"local:{MAX_LOCAL_NODES + 1}", f"node count '{MAX_LOCAL_NODES + 1}'"),
        ("local:two", "node count 'two'"),
        ("hosts:0", "host count '0'"),
        (f"hosts:{MAX_HOSTS + 1}", f"host count '{MAX_HOSTS + 1}'"),
        ("hosts:", "host count ''"),
        ("ray://head:10001", "Ray Client"),
        ("head", "neither off, local[:N], hosts:N nor HOST:PORT"),
        ("head:0", "neither"),
        ("head:70000", "neither"),
        ("on", "neither"),
    ],
)
def test_invalid_values_say_why(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        parse(text)


def test_describe_round_trips() -> None:
    for text in ("off", "local:1", "local:4", "hosts:3", "10.1.2.3:6379"):
        assert parse(text).describe() == text
