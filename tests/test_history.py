"""The History merges in-process events with server event files, in time order, torn lines skipped;
the writers share one open file per path and write whole lines when a reader needs them."""

from __future__ import annotations

import asyncio
import math
import threading
from pathlib import Path

from pytest_rollout_chaos.history import (
    Event,
    EventWriter,
    History,
    fingerprint,
    fingerprint_length,
    flush_events,
    logprob_digest,
    text_fingerprint,
)


def test_events_from_files_and_memory_are_merged_in_time_order(tmp_path: Path) -> None:
    events_file = tmp_path / "agent.events.jsonl"
    history = History()
    history.follow(events_file)
    writer = EventWriter("agent", events_file)
    history.append("collector", "invoke", "collect", {"rows": 2})
    writer.emit("invoke", "POST /run", {"row": 0}, request_id="r0")
    writer.emit("ok", "POST /run", {"row": 0, "status": 200}, request_id="r0")
    history.append("collector", "ok", "collect", {"returned": 2})
    ops = [(event.source, event.kind, event.op) for event in history.events()]
    assert ops == [
        ("collector", "invoke", "collect"),
        ("agent", "invoke", "POST /run"),
        ("agent", "ok", "POST /run"),
        ("collector", "ok", "collect"),
    ]
    assert [event.request_id for event in history.events(source="agent")] == ["r0", "r0"]


def test_follow_from_now_skips_older_events(tmp_path: Path) -> None:
    events_file = tmp_path / "model.events.jsonl"
    EventWriter("model", events_file).emit("info", "old")
    history = History()
    history.follow(events_file)
    EventWriter("model", events_file).emit("info", "new")
    assert [event.op for event in history.events()] == ["new"]


def test_a_torn_last_line_waits_and_a_garbled_line_is_skipped(tmp_path: Path) -> None:
    events_file = tmp_path / "policy.events.jsonl"
    history = History()
    history.follow(events_file, from_now=False)
    good = Event(1.0, "policy", "info", "first").to_json()
    events_file.write_text(good + "\n{not json}\n" + '{"t": 2.0, "sour')
    assert [event.op for event in history.events()] == ["first"]
    with events_file.open("a") as handle:
        handle.write('ce": "policy", "kind": "info", "op": "second"}\n')
    assert [event.op for event in history.events()] == ["first", "second"]


def test_a_history_cut_at_a_time_holds_only_what_came_before_it_from_memory_and_files(
    tmp_path: Path,
) -> None:
    events_file = tmp_path / "agent.events.jsonl"
    history = History()
    history.follow(events_file)
    history.append("collector", "invoke", "collect", {"step": 1})
    EventWriter("agent", events_file).emit("ok", "POST /run", {"row": 0})
    cut_at = history.append("collector", "ok", "collect", {"step": 1}).t
    EventWriter("agent", events_file).emit("ok", "POST /run", {"row": 0})
    history.append("collector", "invoke", "collect", {"step": 2})
    cut = history.until(cut_at)
    assert [(event.source, event.data) for event in cut.events()] == [
        ("collector", {"step": 1}),
        ("agent", {"row": 0}),
        ("collector", {"step": 1}),
    ]
    assert cut.t0 == history.t0
    assert len(history) == 5  # the History itself keeps everything
    history.append("collector", "ok", "collect", {"step": 2})
    assert len(cut) == 3  # a copy: what comes later stays out of it


def test_non_finite_floats_survive_as_text() -> None:
    line = Event(0.5, "fault", "info", "inject", {"value": math.nan, "nested": [math.inf]}).to_json()
    event = Event.from_json(line)
    assert event.data == {"value": "nan", "nested": ["inf"]}


def test_filters_and_timeline() -> None:
    history = History(t0=0.0)
    history.append("fault", "info", "inject", {"fault": "kill", "target": "agent"})
    history.append("collector", "fail", "collect", {"error": "short count"})
    assert len(history.events(source="fault")) == 1
    assert len(history.events(kind="fail")) == 1
    assert len(history.events(op="collect")) == 1
    assert "fault info inject (fault='kill', target='agent')" in history.timeline()


def test_a_logprob_digest_sums_in_order_and_names_the_first_value_that_is_no_finite_number() -> None:
    values = [-((index * 37) % 1000) / 997 for index in range(2048)]
    total = weighted = 0.0
    for position, value in enumerate(values):
        total += value
        weighted += (position + 1) * value
    assert logprob_digest(values) == f"2048:{total:.6f}:{weighted:.6f}"
    assert logprob_digest([-0.5, -1.25, -3.0]) == "3:-4.750000:-12.000000"
    assert logprob_digest([0, -1.5]) == "2:-1.500000:-3.000000", "an int is a number"
    assert logprob_digest([-0.5, math.nan, -math.inf]) == "3:x1"
    assert logprob_digest([-0.5, -math.inf, math.nan]) == "3:x1"
    assert logprob_digest([-0.5, math.inf, -math.inf]) == "3:x1", "a sum of infinities is no number either"
    assert logprob_digest([-0.5, None]) == "2:x1"
    assert logprob_digest([True]) == "1:x0"
    assert logprob_digest([]) == "0:0.000000:0.000000"


def test_a_text_fingerprint_tells_texts_apart_and_reads_null_as_empty() -> None:
    assert text_fingerprint("The answer is 4.") == text_fingerprint("The answer is 4.")
    assert text_fingerprint("The answer is 4.") != text_fingerprint("The answer is 5.")
    assert text_fingerprint(None) == text_fingerprint("")
    assert (text_fingerprint("") or "").startswith("t0:")
    assert text_fingerprint([{"type": "text", "text": "x"}]) is None  # parts: not one text
    assert len(text_fingerprint("x" * 5000) or "") == len("t5000:") + 16


def test_a_fingerprint_tells_token_lists_apart_at_a_fixed_size() -> None:
    long = list(range(5000))
    assert fingerprint(long) == fingerprint(list(long))
    assert fingerprint(long) != fingerprint([*long[:-1], 0])
    assert fingerprint([1, 23]) != fingerprint([12, 3])
    assert len(fingerprint(long)) == len("5000:") + 16
    assert fingerprint_length(fingerprint(long)) == 5000
    assert fingerprint_length("not one") is None


def test_writers_of_one_file_share_one_descriptor(tmp_path: Path) -> None:
    events_file = tmp_path / "layer.events.jsonl"
    writers = [EventWriter(source, events_file) for source in ("policy", "model", "agent")]
    for writer in writers * 3:
        writer.emit("info", "probe")

    def open_on_file() -> int:
        descriptors = Path("/proc/self/fd").iterdir()
        return sum(1 for fd in descriptors if _target(fd) == str(events_file))

    assert open_on_file() == 1, "every writer of a path shares one open file"
    assert len(events_file.read_text().splitlines()) == 9


def _target(fd: Path) -> str:
    try:
        return str(fd.readlink())
    except OSError:  # the descriptor of the directory listing itself, closed by now
        return ""


def test_on_an_event_loop_a_turns_events_are_written_at_its_end_and_flush_writes_now(
    tmp_path: Path,
) -> None:
    events_file = tmp_path / "agent.events.jsonl"
    writer = EventWriter("agent", events_file)
    seen: dict[str, int] = {}

    def lines() -> int:
        return len(events_file.read_text().splitlines()) if events_file.exists() else 0

    async def emit_on_loop() -> None:
        for index in range(5):
            writer.emit("info", "step", {"index": index})
        seen["in the turn"] = lines()
        await asyncio.sleep(0)
        seen["a turn later"] = lines()
        writer.emit("info", "answer")
        flush_events()
        seen["after flush_events"] = lines()

    asyncio.run(emit_on_loop())
    assert seen == {"in the turn": 0, "a turn later": 5, "after flush_events": 6}
    writer.emit("info", "no loop")
    assert lines() == 7, "with no event loop running an event is written at once"


def test_a_history_following_a_file_being_written_reads_every_event_once(tmp_path: Path) -> None:
    # A reader can catch a write half-done (the kernel grows the file page by page), so a file
    # may end mid-line at any moment; the History takes whole lines only and waits for the rest.
    events_file = tmp_path / "layer.events.jsonl"
    writer = EventWriter("policy", events_file)
    history = History()
    history.follow(events_file)
    done = threading.Event()
    counts: list[int] = []
    big = {"text": "x" * 3000}  # lines that span pages, in bursts past the writer's buffer

    def follow() -> None:
        while not done.is_set():
            counts.append(len(history.events()))

    async def burst() -> None:
        for round_index in range(40):
            for index in range(30):
                writer.emit("info", "request", {"index": round_index * 30 + index, **big})
            await asyncio.sleep(0)

    reader = threading.Thread(target=follow)
    reader.start()
    try:
        asyncio.run(burst())
    finally:
        done.set()
        reader.join(timeout=30)
    indexes = [event.data["index"] for event in history.events()]
    assert indexes == list(range(1200)), "every event once, in order, none lost to a torn read"
    assert counts == sorted(counts), "a follower never loses an event it has read"
