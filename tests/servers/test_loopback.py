"""``loopback.peer_allowed``: the loopback peer, and the one peer the harness names, and no other."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.servers.loopback import CONTROL_PEER_ENV, peer_allowed


def test_without_a_named_peer_only_loopback_itself_is_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONTROL_PEER_ENV, raising=False)
    assert peer_allowed("127.0.0.1")
    assert not peer_allowed("192.0.2.2")
    assert not peer_allowed(None)


def test_the_named_peer_is_trusted_and_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONTROL_PEER_ENV, "192.0.2.2")  # a Ray node's address on this machine
    assert peer_allowed("192.0.2.2")
    assert peer_allowed("127.0.0.1")
    assert not peer_allowed("192.0.2.3")
    assert not peer_allowed("127.0.0.2")
    assert not peer_allowed(None)
