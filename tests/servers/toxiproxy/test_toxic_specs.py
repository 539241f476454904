"""Toxic requests: defaults, validation messages that say what is valid, updates that merge."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_rollout_chaos.servers.toxiproxy.errors import ApiError
from pytest_rollout_chaos.servers.toxiproxy.toxics import TOXIC_TYPES, apply_update, parse_toxic, slice_points


def test_defaults_match_toxiproxy() -> None:
    toxic = parse_toxic({"type": "latency", "attributes": {"latency": 300}})
    assert toxic.to_json() == {
        "attributes": {"latency": 300, "jitter": 0},
        "name": "latency_downstream",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1.0,
    }
    assert parse_toxic({"type": "timeout", "stream": "upstream"}).name == "timeout_upstream"


def test_every_toxic_type_of_the_catalog_exists() -> None:
    expected = {"latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data"}
    assert set(TOXIC_TYPES) == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"type": "latncy"}, "invalid toxic type: 'latncy' (valid: bandwidth, latency, limit_data,"),
        ({"type": "latency", "stream": "both"}, "stream was invalid, can be either upstream or downstream"),
        (
            {"type": "latency", "attributes": {"latncy": 1}},
            "latency has no attribute 'latncy' (valid: latency, jitter)",
        ),
        (
            {"type": "latency", "attributes": {"latency": -5}},
            "latency.latency must be a non-negative integer",
        ),
        (
            {"type": "latency", "attributes": {"latency": 1.5}},
            "latency.latency must be a non-negative integer",
        ),
        (
            {"type": "latency", "attributes": {"latency": True}},
            "latency.latency must be a non-negative integer",
        ),
        ({"type": "latency", "toxicity": 1.5}, "toxicity must be a number from 0 to 1"),
        ({"type": "slicer", "attributes": {"average_size": 0}}, "average_size must be >= 1"),
        (
            {"type": "slicer", "attributes": {"average_size": 4, "size_variation": 4}},
            "smaller than average_size",
        ),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_bad_toxics_are_400_with_the_reason(body: object, message: str) -> None:
    with pytest.raises(ApiError) as error:
        parse_toxic(body)
    assert error.value.status == 400
    assert message in error.value.message


def test_integral_floats_are_accepted() -> None:
    assert parse_toxic({"type": "bandwidth", "attributes": {"rate": 100.0}}).attributes == {"rate": 100}


def test_update_merges_attributes_and_keeps_identity() -> None:
    toxic = parse_toxic({"type": "latency", "name": "slow", "attributes": {"latency": 300, "jitter": 10}})
    updated = apply_update(toxic, {"attributes": {"jitter": 0}, "toxicity": 0.25, "name": "ignored"})
    assert updated.name == "slow"
    assert dict(updated.attributes) == {"latency": 300, "jitter": 0}
    assert updated.toxicity == 0.25
    with pytest.raises(ApiError):
        apply_update(toxic, {"attributes": {"rate": 1}})


@given(
    size=st.integers(min_value=0, max_value=5000),
    average=st.integers(min_value=1, max_value=300),
    data=st.data(),
)
def test_slices_cover_the_chunk_and_respect_the_bound(size: int, average: int, data: st.DataObject) -> None:
    variation = data.draw(st.integers(min_value=0, max_value=average - 1))
    pieces = slice_points(size, average, variation, random.Random(size))
    assert sum(pieces) == size
    assert all(0 < piece <= average + variation for piece in pieces) or size == 0
