"""The History: one append-only record of what every server, fault and collector did.

Faults and servers write to it; invariants read it, and nothing else (Jepsen's history).
Events use Jepsen's vocabulary: ``invoke`` when an operation starts, then ``ok`` or ``fail``
when it ends (``info`` when nobody can know, e.g. a request cut by a fault), and ``info`` for
plain facts. Times are ``time.monotonic()``, which on Linux is one clock for every process, so
events from server processes and from pytest order correctly.

Server processes cannot share memory with pytest, so each appends JSON lines to its own
events file (``EventWriter``); the History follows those files and merges them on read.
Events written before a server was killed survive it, which is the point. A server on another
machine writes its file there; whoever brings it here (``pull_with``) is called before each read.

A server records every request it sees, so writing must cost little: the writers of a process
share one open file per path and buffer what they emit, writing whole lines in one ``write``.
The buffer is written at the points where a reader may need it: before any answer of the
server leaves (the servers call ``flush_events`` then, so whoever got an answer can read what
was recorded before it), on the event loop's next turn otherwise, at once from code with no
event loop, and at exit. A reader may still catch a write half done (the kernel grows a file
page by page), so the History takes whole lines only and leaves the rest for its next read;
readers that wait for something recorded after an answer left (``engine.acted.settle``) poll.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import hashlib
import json
import math
import operator
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from pytest_rollout_chaos import json_decode

EventKind = Literal["invoke", "ok", "fail", "info"]
EVENT_KINDS: Final = ("invoke", "ok", "fail", "info")
EVENTS_FILE_ENV: Final = "ROLLOUT_CHAOS_EVENTS_FILE"


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened: when, who, what kind, which operation, and details."""

    t: float
    source: str
    kind: EventKind
    op: str
    data: Mapping[str, Any] = field(default_factory=dict)
    request_id: str | None = None

    def to_json(self) -> str:
        record = {
            "t": self.t,
            "source": self.source,
            "kind": self.kind,
            "op": self.op,
            "data": self.data,
            "request_id": self.request_id,
        }
        # Not orjson: it writes a NaN as null without a word, where this names it ("nan"); an
        # event is a few hundred bytes, so json's C encoder costs a few microseconds.
        try:  # the usual event is plain JSON already: encoded at C speed, no walk of its data
            return json.dumps(record, allow_nan=False)
        except (TypeError, ValueError):  # a non-finite float, or a value JSON has no form for
            record["data"] = _jsonable(self.data)
            return json.dumps(record)

    @classmethod
    def from_json(cls, line: str | bytes) -> Event:
        raw = json_decode.loads(line)
        return cls(
            t=float(raw["t"]),
            source=str(raw["source"]),
            kind=raw["kind"],
            op=str(raw["op"]),
            data=raw.get("data") or {},
            request_id=raw.get("request_id"),
        )

    def describe(self, t0: float = 0.0) -> str:
        """``t=1.234s agent ok run (row=3)`` style line for failure stories."""
        details = ", ".join(f"{key}={value!r}" for key, value in list(self.data.items())[:6])
        rid = f" [{self.request_id}]" if self.request_id else ""
        return f"t={self.t - t0:7.3f}s {self.source} {self.kind} {self.op}{rid}" + (
            f" ({details})" if details else ""
        )


class History:
    """Thread-safe, append-only; merges in-process events with followed server event files."""

    def __init__(self, *, t0: float | None = None) -> None:
        self.t0 = time.monotonic() if t0 is None else t0
        self._lock = threading.Lock()
        self._local: list[Event] = []
        self._files: dict[Path, int] = {}  # path -> byte offset read so far
        self._from_files: list[Event] = []
        self._pulls: list[Callable[[], None]] = []

    def append(
        self,
        source: str,
        kind: EventKind,
        op: str,
        data: Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
    ) -> Event:
        """Record an event now and return it."""
        event = Event(time.monotonic(), source, kind, op, dict(data or {}), request_id)
        with self._lock:
            self._local.append(event)
        return event

    def follow(self, path: Path, *, from_now: bool = True) -> None:
        """Merge the events a server writes to ``path``; by default only those from now on."""
        offset = path.stat().st_size if from_now and path.exists() else 0
        with self._lock:
            self._files.setdefault(path, offset)

    def pull_with(self, pull: Callable[[], None]) -> None:
        """Call ``pull`` before each read of the followed files. It brings here, under the same
        paths, what servers on other machines wrote to theirs (``ray.files``), so what such a server
        recorded before an answer left is read after it, as for a server on this machine."""
        with self._lock:
            self._pulls.append(pull)

    def sync(self) -> None:
        """Read what the followed files gained since the last read."""
        with self._lock:
            pulls = tuple(self._pulls)
        for pull in pulls:
            pull()
        with self._lock:
            for path, offset in list(self._files.items()):
                try:
                    with path.open("rb") as handle:
                        handle.seek(offset)
                        chunk = handle.read()
                except FileNotFoundError:
                    continue
                complete = chunk.rfind(b"\n") + 1  # a line still being written waits
                for line in chunk[:complete].splitlines():
                    if line.strip():
                        try:
                            self._from_files.append(Event.from_json(line))
                        except (ValueError, KeyError, UnicodeDecodeError):
                            continue  # a torn line from a killed writer is not an event
                self._files[path] = offset + complete

    def events(
        self,
        *,
        source: str | None = None,
        kind: str | None = None,
        op: str | None = None,
    ) -> list[Event]:
        """All events so far in time order, optionally filtered."""
        self.sync()
        with self._lock:
            merged = sorted([*self._local, *self._from_files], key=lambda event: event.t)
        return [
            event
            for event in merged
            if (source is None or event.source == source)
            and (kind is None or event.kind == kind)
            and (op is None or event.op == op)
        ]

    def until(self, t: float) -> History:
        """A copy that holds the events so far recorded at or before ``t`` (``time.monotonic()``),
        with the same ``t0``, and follows no file: what a judge of one collection reads when the
        same collector ran more after it, whose requests name the same rows."""
        cut = History(t0=self.t0)
        cut._local = [event for event in self.events() if event.t <= t]
        return cut

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())

    def __len__(self) -> int:
        return len(self.events())

    def timeline(self, events: Iterable[Event] | None = None, *, limit: int = 60) -> str:
        """A readable block of event lines relative to ``t0``."""
        chosen = list(self.events() if events is None else events)
        lines = [event.describe(self.t0) for event in chosen[:limit]]
        if len(chosen) > limit:
            lines.append(f"... {len(chosen) - limit} more events")
        return "\n".join(lines)


class EventWriter:
    """The server side: append events as JSON lines to this process's events file."""

    def __init__(self, source: str, path: Path | None = None) -> None:
        self.source = source
        env_path = os.environ.get(EVENTS_FILE_ENV)
        chosen = path if path is not None else (Path(env_path) if env_path else None)
        self._sink = _sink(chosen) if chosen is not None else None

    def emit(
        self,
        kind: EventKind,
        op: str,
        data: Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
    ) -> None:
        if self._sink is None:
            return
        line = Event(time.monotonic(), self.source, kind, op, dict(data or {}), request_id).to_json()
        self._sink.add(line.encode() + b"\n")

    def flush(self) -> None:
        """Write what this writer's file has buffered, now."""
        if self._sink is not None:
            self._sink.flush()


def flush_events() -> None:
    """Write every buffered event of this process to its file, now (before an answer leaves)."""
    for sink in list(_SINKS.values()):
        sink.flush()


_FLUSH_AT_BYTES: Final = 64 * 1024  # a burst larger than this is written without waiting a turn


class _Sink:
    """One events file of this process: an append-only descriptor and the lines not yet written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._size = 0
        self._fd = -1
        self._scheduled_on: asyncio.AbstractEventLoop | None = None

    def add(self, line: bytes) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            self._pending.append(line)
            self._size += len(line)
            now = loop is None or self._size >= _FLUSH_AT_BYTES
            if loop is not None and not now and self._scheduled_on is not loop:
                # one write per turn of the loop, however many events the turn emitted
                loop.call_soon(self.flush)
                self._scheduled_on = loop
        if now:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            self._scheduled_on = None
            if not self._pending:
                return
            data = b"".join(self._pending)
            self._pending.clear()
            self._size = 0
            if self._fd < 0:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            view = memoryview(data)
            while view:  # a regular file takes it all at once; a signal may cut a write short
                view = view[os.write(self._fd, view) :]

    def forget(self) -> None:
        """In a forked child: the parent's lines and descriptor are the parent's."""
        self._lock = threading.Lock()
        self._pending.clear()
        self._size = 0
        self._fd = -1
        self._scheduled_on = None


_SINKS: dict[Path, _Sink] = {}
_SINKS_LOCK = threading.Lock()


def _sink(path: Path) -> _Sink:
    with _SINKS_LOCK:
        found = _SINKS.get(path)
        if found is None:
            found = _SINKS[path] = _Sink(path)
        return found


def _forget_sinks() -> None:
    global _SINKS_LOCK  # a lock another thread held at the fork would stay held in the child
    _SINKS_LOCK = threading.Lock()
    for sink in _SINKS.values():
        sink.forget()


atexit.register(flush_events)
os.register_at_fork(after_in_child=_forget_sinks)


def fingerprint(token_ids: Sequence[int]) -> str:
    """``"<count>:<16 hex digits>"``: how the History records a list of token ids.

    A fixed ~25 bytes whatever the length, so the fault layer can record every generation it
    forwards without copying the tokens, and a judge can still tell two lists apart.
    """
    digest = hashlib.blake2b(",".join(map(str, map(int, token_ids))).encode(), digest_size=8)
    return f"{len(token_ids)}:{digest.hexdigest()}"


def text_fingerprint(text: object) -> str | None:
    """``"t<chars>:<16 hex digits>"`` of one message's text: how the History records what the
    policy answered and what the environment and the policy were sent, so a judge can tell whether
    the same text went on; None for content that is not text (a list of parts). Null content (an
    answer that is all tool calls) counts as the empty text."""
    if text is None:
        text = ""
    if not isinstance(text, str):
        return None
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8)
    return f"t{len(text)}:{digest.hexdigest()}"


def fingerprint_length(value: str) -> int | None:
    """The token count a ``fingerprint`` carries; None for anything else."""
    count, _, digest = value.partition(":")
    return int(count) if count.isdigit() and len(digest) == 16 else None


def logprob_digest(values: Sequence[object]) -> str:
    """``"<count>:<sum>:<weighted sum>"`` of one generation's logprobs (sums to 6 decimals), or
    ``"<count>:x<position>"`` naming the first value that is not a finite number.

    How the History records logprobs: a fixed size, like ``fingerprint``, but comparable within a
    tolerance (``invariants.rules.digests_agree``), so a collector that keeps logprobs as float32
    still matches the record while one that zeroes or invents them does not. The weighted sum
    (position ``i`` counts ``i + 1`` times) tells apart the same values in another order.
    """
    if set(map(type, values)) == {float}:
        # the usual list, summed in C in the same order as below: a finite sum means every value
        # was finite (a NaN or an infinity never leaves a sum), so the digest is the same
        total = functools.reduce(operator.add, values, 0.0)
        weighted = functools.reduce(operator.add, map(operator.mul, range(1, len(values) + 1), values), 0.0)
        if math.isfinite(total) and math.isfinite(weighted):
            return f"{len(values)}:{total:.6f}:{weighted:.6f}"
    total = weighted = 0.0
    for position, value in enumerate(values):
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            return f"{len(values)}:x{position}"
        total += value
        weighted += (position + 1) * value
    return f"{len(values)}:{total:.6f}:{weighted:.6f}"


def _jsonable(value: Any) -> Any:
    """Make data JSON-safe: non-finite floats become strings so the line still parses."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)
