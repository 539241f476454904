"""What the gate tells while a side runs, read from the side's pytest output as it comes.

A side takes minutes (the first scenario waits for the stack: seconds here, minutes with vLLM), so
the gate says which side is running, passes on each server's ready line, and as each scenario
ends says which of how many it was, its verdict, the time spent and, once a few have ended, about
how long is left. These lines go to stderr only: stdout's table and the ``--json`` file stay the
gate's results alone.

The estimate leaves out the first scenario (it paid for starting the stack) and assumes the rest
take as long, on average, as those that ended after it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Final

from pytest_rollout_chaos.servers.keeper import STARTING_LINE

# A scenario's status line under ``-v``: ``scenarios/x.chaos.yaml::x PASSED  [ 4%]``.
STATUS_LINE: Final = re.compile(r"::(?P<name>[\w.-]+) (?P<outcome>PASSED|FAILED|ERROR|SKIPPED)\b")
# ``collected 12 items``, or ``collected 12 items / 10 deselected / 2 selected`` under ``-k``.
COLLECTED_LINE: Final = re.compile(r"\bcollected (?P<count>\d+) items?(?:.* (?P<selected>\d+) selected)?")
# The child's own lines as its servers start (``servers.keeper``'s), passed on as they are.
SERVER_LINE: Final = re.compile(rf"{re.escape(STARTING_LINE)}|rollout-chaos: \S+ ready in [\d.]+s")
ESTIMATE_AFTER: Final = 2  # scenarios ended after the first before an estimate is given
QUIET_S: Final = 60.0  # a side silent this long says it is still running


class SideProgress:
    """Follows one side's pytest output (``line``) and gives its progress lines to ``tell``."""

    def __init__(
        self, label: str, tell: Callable[[str], None], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.label = label
        self._tell = tell
        self._clock = clock
        self._started = self._last_told = clock()
        self._total: int | None = None
        self._ended: set[str] = set()
        self._first_ended_at: float | None = None

    def begin(self, what: str) -> None:
        self._say(f"[{self.label}] running {what}")

    def line(self, text: str) -> None:
        """One line of the side's pytest output."""
        if (collected := COLLECTED_LINE.search(text)) is not None:
            self._total = int(collected["selected"] or collected["count"])
        elif SERVER_LINE.fullmatch(text.strip()):
            self._say(f"[{self.label}] {text.strip()}")
        elif (status := STATUS_LINE.search(text)) is not None:
            self._ended_one(status["name"], status["outcome"])

    def tick(self) -> None:
        """Called while the side is silent: a line after ``QUIET_S`` without one."""
        if self._clock() - self._last_told >= QUIET_S:
            ended = f", {len(self._ended)} of {self._total_text()} ended" if self._ended else ""
            self._say(f"[{self.label}] still running ({_clock_text(self._elapsed())} elapsed{ended})")

    def end(self, exit_code: int | None, *, timed_out: bool, stopped: bool = False) -> None:
        """The side's last line: how its child ended (``stopped``: by the gate, interrupted)."""
        how = "timed out" if timed_out else "stopped" if stopped else f"pytest exited {exit_code}"
        self._say(f"[{self.label}] done in {_clock_text(self._elapsed())} ({how})")

    def _ended_one(self, name: str, outcome: str) -> None:
        if name not in self._ended:  # a teardown error after a pass is the same scenario again
            self._ended.add(name)
            if len(self._ended) == 1:
                self._first_ended_at = self._clock()
        count = len(self._ended)
        timing = f"{_clock_text(self._elapsed())} elapsed"
        left = self._left_s()
        if left is not None:
            timing += f", about {_clock_text(left)} left"
        self._say(f"[{self.label} {count}/{self._total_text()}] {name} {outcome} ({timing})")

    def _left_s(self) -> float | None:
        """The time left, from the scenarios that ended after the first; None until enough have."""
        after_first = len(self._ended) - 1
        if self._total is None or self._first_ended_at is None or after_first < ESTIMATE_AFTER:
            return None
        if len(self._ended) >= self._total:
            return None
        per_scenario = (self._clock() - self._first_ended_at) / after_first
        return per_scenario * (self._total - len(self._ended))

    def _total_text(self) -> str:
        return "?" if self._total is None else str(self._total)

    def _elapsed(self) -> float:
        return self._clock() - self._started

    def _say(self, line: str) -> None:
        self._last_told = self._clock()
        self._tell(line)


def _clock_text(seconds: float) -> str:
    """``0:07``, ``12:40``, ``1:02:03``."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
