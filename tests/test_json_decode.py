"""``json_decode.loads``: what Python's json reads, decoded fast where the text keeps to RFC 8259."""

from __future__ import annotations

import json
import math

import pytest

from pytest_rollout_chaos import json_decode


def test_plain_json_decodes_as_json_decodes_it() -> None:
    text = b'{"a": [1, -2.5, "x\\u00e9", true, null, {"b": []}], "big": 18446744073709551615}'
    assert json_decode.loads(text) == json.loads(text)
    assert json_decode.loads(text.decode()) == json.loads(text)


def test_what_only_python_json_reads_still_decodes() -> None:
    nan, inf, minus_inf = json_decode.loads(b"[NaN, Infinity, -Infinity]")
    assert math.isnan(nan)
    assert (inf, minus_inf) == (math.inf, -math.inf)
    assert json_decode.loads(b"[1e400]") == [math.inf]
    assert json_decode.loads(b'"\\ud800"') == "\ud800", "a lone surrogate escape"


@pytest.mark.parametrize("text", [b"{", b'{"a": nan}', b"", b"\xff"])
def test_what_json_rejects_too_raises_a_value_error(text: bytes) -> None:
    with pytest.raises(ValueError, match=r"."):
        json_decode.loads(text)
