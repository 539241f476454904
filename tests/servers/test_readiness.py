"""The one readiness loop: a single deadline, early exit noticed at once, transient errors retried."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.servers import readiness


class FakeClock:
    """A clock that only moves when the loop sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_ready_after_some_polls_returns_elapsed() -> None:
    clock = FakeClock()
    answers = iter([False, False, True])
    elapsed = readiness.wait_until(
        lambda: next(answers),
        timeout_s=5,
        exit_code=lambda: None,
        clock=clock,
        sleep=clock.sleep,
        interval_s=0.1,
    )
    assert elapsed == pytest.approx(0.2)


def test_early_exit_is_reported_before_the_deadline() -> None:
    clock = FakeClock()
    codes = iter([None, None, 3])
    with pytest.raises(readiness.NotReady) as info:
        readiness.wait_until(
            lambda: False,
            timeout_s=60,
            exit_code=lambda: next(codes),
            clock=clock,
            sleep=clock.sleep,
            interval_s=0.1,
        )
    assert info.value.reason == "exited"
    assert info.value.exit_code == 3
    assert info.value.elapsed_s == pytest.approx(0.2)


def test_timeout_keeps_the_last_transient_error() -> None:
    clock = FakeClock()

    def refused() -> bool:
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(readiness.NotReady) as info:
        readiness.wait_until(
            refused, timeout_s=1.0, exit_code=lambda: None, clock=clock, sleep=clock.sleep, interval_s=0.3
        )
    assert info.value.reason == "timeout"
    assert info.value.elapsed_s == pytest.approx(1.0)
    assert info.value.last_error is not None
    assert "ConnectionRefusedError" in info.value.last_error
    assert max(clock.sleeps) <= 0.3  # never sleeps past the deadline in one go
    assert sum(clock.sleeps) == pytest.approx(1.0)


def test_a_probe_bug_is_not_retried() -> None:
    clock = FakeClock()

    def broken() -> bool:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        readiness.wait_until(broken, timeout_s=5, exit_code=lambda: None, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


class Target:
    def __init__(self, address: tuple[str, int] | None, log_path: object = None) -> None:
        self._address = address
        self.name = "t"
        self.log_path = log_path

    def address(self) -> tuple[str, int] | None:
        return self._address


def test_all_of_is_stateless_and_describes_itself() -> None:
    calls: list[str] = []

    def first(target: readiness.ProbeTarget) -> bool:
        calls.append("first")
        return True

    first.__doc__ = "first"

    def second(target: readiness.ProbeTarget) -> bool:
        calls.append("second")
        return False

    second.__doc__ = "second"
    probe = readiness.all_of(first, second)
    target = Target(None)
    assert probe(target) is False  # type: ignore[arg-type]
    assert probe(target) is False  # type: ignore[arg-type]
    assert calls == ["first", "second", "first", "second"]
    assert readiness.describe(probe) == "first and second"


def test_log_line_probe(tmp_path: object) -> None:
    from pathlib import Path

    log = Path(str(tmp_path)) / "server.log"
    probe = readiness.log_line(r"listening on http://127\.0\.0\.1:\d+")
    target = Target(None, log)
    assert probe(target) is False  # type: ignore[arg-type]
    log.write_text("starting\nlistening on http://127.0.0.1:4321\n")
    assert probe(target) is True  # type: ignore[arg-type]
