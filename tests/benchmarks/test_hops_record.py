"""The hop benchmark's one check: every request sent through the layer is in its History, answered,
with the fingerprint and logprob digest of the answer it got."""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.hops import HopPath, _expected_record, _unrecorded
from pytest_rollout_chaos.history import Event


def _write(events_file: Path, answered: dict[str, dict[str, list[str]]]) -> None:
    lines = [
        Event(time.monotonic(), "policy", "ok", "POST /v1/chat/completions", data, request_id).to_json()
        for request_id, data in answered.items()
    ]
    events_file.write_text("".join(f"{line}\n" for line in lines))


def test_a_request_missing_from_the_history_or_recorded_short_is_named(tmp_path: Path) -> None:
    events_file = tmp_path / "layer.events.jsonl"
    small, large = _expected_record("small"), _expected_record("large")
    path = HopPath("layer", 1, (), (events_file,))
    path.sent = [("hop-1", "small"), ("hop-2", "large"), ("burst-3", "large")]
    _write(events_file, {"hop-1": small, "hop-2": large, "burst-3": large})
    assert _unrecorded([path]) == ""

    path.sent.append(("hop-4", "small"))  # never recorded
    _write(events_file, {"hop-1": small, "hop-2": {"generations": large["generations"]}, "burst-3": large})
    why = _unrecorded([path, HopPath("direct", 2, ())])
    assert why.startswith("the fault layer's History lacks 2 of the 4 requests"), why
    assert why.endswith(": hop-2, hop-4"), why


def test_paths_that_skip_the_layer_are_not_looked_up(tmp_path: Path) -> None:
    events_file = tmp_path / "layer.events.jsonl"
    events_file.write_text("")
    direct = HopPath("direct", 1, ())
    direct.sent = [("hop-1", "small")]
    assert _unrecorded([direct]) == ""


def test_a_layer_of_several_processes_is_read_from_every_file_and_records_each_answer_once(
    tmp_path: Path,
) -> None:
    main, worker = tmp_path / "layer.events.jsonl", tmp_path / "layer.worker1.events.jsonl"
    small = _expected_record("small")
    path = HopPath("layer, 2 processes", 1, (), (main, worker))
    path.sent = [("hop-1", "small"), ("hop-2", "small")]
    _write(main, {"hop-1": small})
    _write(worker, {"hop-2": small})
    assert _unrecorded([path]) == ""

    _write(worker, {"hop-1": small, "hop-2": small})  # hop-1 recorded by both processes
    assert _unrecorded([path]) == "the fault layer's History records answers more than once (1 extra)"
