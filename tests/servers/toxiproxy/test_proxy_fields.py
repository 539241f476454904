"""Proxy requests: Toxiproxy's defaults and its error texts, plus where and what is valid."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.servers.toxiproxy.collection import parse_proxy_fields
from pytest_rollout_chaos.servers.toxiproxy.errors import ApiError


def test_defaults() -> None:
    fields = parse_proxy_fields({"name": "llm", "upstream": "127.0.0.1:8000"})
    assert (fields.listen, fields.enabled) == ("127.0.0.1:0", True)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"upstream": "127.0.0.1:1"}, "missing required field: name"),
        ({"name": "x"}, "missing required field: upstream"),
        ({"name": "x", "upstream": "nohost"}, "upstream: invalid address 'nohost' (valid: HOST:PORT"),
        ({"name": "x", "upstream": "a:1", "listen": "a:b"}, "listen: invalid address 'a:b'"),
        ({"name": "x", "upstream": "a:1", "enabled": "yes"}, "enabled must be true or false"),
        ({"name": 5, "upstream": "a:1"}, "name must be a string"),
    ],
)
def test_bad_proxies_are_400_with_the_reason(body: object, message: str) -> None:
    with pytest.raises(ApiError) as error:
        parse_proxy_fields(body, where=" at proxy 2")
    assert error.value.status == 400
    assert message in error.value.message
    assert " at proxy 2" in error.value.message
