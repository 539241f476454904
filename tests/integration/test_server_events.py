"""A server of ours writes what it recorded before an answer leaves, so whoever got the answer can
read it, even when the server's loop does not come round again for a while."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

from pytest_rollout_chaos.history import EVENTS_FILE_ENV, History
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec

REPO = Path(__file__).resolve().parents[2]
STALL_S = 1.0  # how long the server's loop is blocked right after it answers


def _server(tmp_path: Path) -> tuple[ManagedProcess, Path]:
    events_file = tmp_path / "events_server.events.jsonl"
    spec = ServerSpec(
        name="events_server",
        argv=(sys.executable, "-m", "tests.programs.events_server"),
        probe=readiness.all_of(readiness.address_known(), readiness.http_ok("/health")),
        env={EVENTS_FILE_ENV: str(events_file)},
        ready_timeout_s=20.0,
        cwd=REPO,
        hint="see tests/programs/events_server.py",
    )
    return ManagedProcess(spec, tmp_path / "logs"), events_file


def _emit(url: str, count: int, stall_s: float) -> int:
    request = urllib.request.Request(f"{url}/emit?n={count}&stall_s={stall_s}", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(json.loads(answer.read())["emitted"])


def test_events_recorded_before_an_answer_are_readable_when_it_arrives(tmp_path: Path) -> None:
    process, events_file = _server(tmp_path)
    process.start()
    try:
        history = History()
        history.follow(events_file)
        assert _emit(process.url, 25, STALL_S) == 25
        # read at once: the server's loop is still blocked, so only a write made before the
        # answer left can be in the file now
        seen = [event.data["index"] for event in history.events(source="events_server")]
        assert seen == list(range(25)), f"read right after the answer: {seen}"
    finally:
        process.stop()
