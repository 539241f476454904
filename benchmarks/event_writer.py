"""The History's event writer alone: events per second into an events file, as the servers write them.

Every server records what it sees through ``history.EventWriter`` (the fault layer two events
per request, more with rule hits), so its cost is paid on every hop of every rollout. Measured
side by side in one run, ``events`` events of the fault layer's shape (an ``invoke``, then an
``ok`` with fingerprints and logprob digests) each way:

- ``on a loop``: emitted on a running event loop and written once per answer, as the layer does
  (``flush`` after each ``ok``);
- ``no loop``: emitted from plain code, each written at once;
- ``reopened per event``: the file opened, appended to and closed for every event, as the writer
  did before it kept its file open, for comparison.

The ratio is on-a-loop events/s over reopened-per-event events/s.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._result import Number, Result
from pytest_rollout_chaos.history import Event, EventWriter, fingerprint, logprob_digest

FACTS = {"link": "model->policy", "server": "policy", "row": 3}
OUTCOME = {
    **FACTS,
    "status": 200,
    "latency_ms": 12.5,
    "generations": [fingerprint(list(range(200)))],
    "logprobs": [logprob_digest([-0.5] * 200)],
}


def run(*, events: int = 20_000, repeats: int = 3) -> Result:
    rates: dict[str, list[float]] = {"on a loop": [], "no loop": [], "reopened per event": []}
    with tempfile.TemporaryDirectory(prefix="bench-writer-") as scratch:
        for attempt in range(repeats):
            for way, measure in (
                ("on a loop", _on_loop),
                ("no loop", _no_loop),
                ("reopened per event", _reopened),
            ):
                path = Path(scratch) / f"{attempt}-{way.replace(' ', '-')}.events.jsonl"
                seconds = measure(path, events)
                rates[way].append(events / seconds)
                if len(path.read_text().splitlines()) != events:
                    raise RuntimeError(f"{way}: {path} does not hold {events} lines")
    medians = {way: statistics.median(values) for way, values in rates.items()}
    return Result(
        "event_writer",
        (
            *(Number(way, rate, "events/s") for way, rate in medians.items()),
            Number("on a loop / reopened", medians["on a loop"] / medians["reopened per event"], "x"),
        ),
        details={"events": events, "repeats": repeats, "events_per_s": rates},
    )


def _on_loop(path: Path, events: int) -> float:
    writer = EventWriter("policy", path)

    async def emit_all() -> float:
        began = time.perf_counter()
        for index in range(events // 2):
            request_id = f"policy-{index}"
            writer.emit("invoke", "POST /v1/chat/completions", FACTS, request_id=request_id)
            writer.emit("ok", "POST /v1/chat/completions", OUTCOME, request_id=request_id)
            writer.flush()  # before the answer leaves
        return time.perf_counter() - began

    return asyncio.run(emit_all())


def _no_loop(path: Path, events: int) -> float:
    writer = EventWriter("policy", path)
    began = time.perf_counter()
    for index in range(events // 2):
        request_id = f"policy-{index}"
        writer.emit("invoke", "POST /v1/chat/completions", FACTS, request_id=request_id)
        writer.emit("ok", "POST /v1/chat/completions", OUTCOME, request_id=request_id)
    return time.perf_counter() - began


def _reopened(path: Path, events: int) -> float:
    began = time.perf_counter()
    for index in range(events // 2):
        request_id = f"policy-{index}"
        for kind, data in (("invoke", FACTS), ("ok", OUTCOME)):
            line = Event(time.monotonic(), "policy", kind, "POST /v1/chat/completions", data, request_id)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(line.to_json() + "\n")
    return time.perf_counter() - began


if __name__ == "__main__":
    from benchmarks._result import table

    print(table([run()]))
