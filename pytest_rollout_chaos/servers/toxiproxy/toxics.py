"""The toxics: their attributes (validated, with units), and how each one treats a stream.

A toxic is data (``ToxicSpec``, the JSON the API speaks) plus a behaviour: an async function
that runs on one ``Stage`` of one direction of one connection, taking items with
``stage.receive()`` and passing them on with ``stage.forward()``/``stage.send()``. A behaviour
may be cancelled at any await; the item it holds stays in ``stage.held``, so an update or a
removal never drops data (see ``link.py``).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from pytest_rollout_chaos.servers.toxiproxy.errors import ApiError

STREAMS: Final = ("upstream", "downstream")


@dataclass(frozen=True, slots=True)
class Chunk:
    """Bytes read from a socket, stamped with the monotonic time they arrived."""

    data: bytes
    received_at: float


@dataclass(frozen=True, slots=True)
class Close:
    """End of a stream: a normal close, or a TCP reset (SO_LINGER 0) when ``reset``."""

    reset: bool = False


Item = Chunk | Close


class Stage(Protocol):
    """What a behaviour uses of the stage it runs on (``link.Stage``), which this module does not import."""

    held: Item | None
    bytes_passed: int

    async def receive(self) -> Item: ...

    def send(self, item: Item) -> None: ...

    def forward(self, item: Item) -> None: ...


Behaviour = Callable[[Stage, Mapping[str, int], random.Random], Coroutine[Any, Any, None]]


@dataclass(frozen=True, slots=True)
class ToxicType:
    """One kind of toxic: its attribute names (all integers, default 0) and its behaviour."""

    name: str
    attributes: tuple[str, ...]
    run: Behaviour
    closes_on_removal: bool = False  # the timeout toxic closes the connection when removed
    validate: Callable[[Mapping[str, int]], str | None] = field(default=lambda _attrs: None)


@dataclass(frozen=True, slots=True)
class ToxicSpec:
    """A toxic as the API shows it; ``attributes`` holds every attribute of its type."""

    name: str
    type: str
    stream: str
    toxicity: float
    attributes: Mapping[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": dict(self.attributes),
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
        }

    @property
    def kind(self) -> ToxicType:
        return TOXIC_TYPES[self.type]


# -- behaviours -----------------------------------------------------------------------------------
async def _sleep_until(deadline: float) -> None:
    wait_s = deadline - time.monotonic()
    if wait_s > 0:
        await asyncio.sleep(wait_s)


async def run_noop(stage: Stage, attrs: Mapping[str, int], rng: random.Random) -> None:
    """Pass everything through unchanged."""
    while True:
        item = await stage.receive()
        stage.forward(item)
        if isinstance(item, Close):
            return


async def _latency(stage: Stage, attrs: Mapping[str, int], rng: random.Random) -> None:
    # Delay each chunk to (arrival + latency +- jitter): chunks that queued behind a slow one
    # are not delayed twice, as in Toxiproxy's timestamped pipeline.
    latency_ms, jitter_ms = attrs["latency"], attrs["jitter"]
    while True:
        item = await stage.receive()
        if isinstance(item, Chunk):
            delay_ms = latency_ms + (rng.randint(-jitter_ms, jitter_ms) if jitter_ms > 0 else 0)
            await _sleep_until(item.received_at + delay_ms / 1000)
        stage.forward(item)
        if isinstance(item, Close):
            return


async def _bandwidth(stage: Stage, attrs: Mapping[str, int], rng: random.Random) -> None:
    # rate is KB/s with K = 1000, i.e. bytes per millisecond; big chunks go out in 100 ms pieces.
    rate = attrs["rate"]
    free_at = time.monotonic()
    while True:
        item = await stage.receive()
        if isinstance(item, Close) or rate <= 0:
            stage.forward(item)
            if isinstance(item, Close):
                return
            continue
        free_at = max(free_at, time.monotonic())
        data, piece_size = item.data, rate * 100
        while data:
            piece, data = data[:piece_size], data[piece_size:]
            free_at += len(piece) / (rate * 1000)
            await _sleep_until(free_at)
            stage.send(Chunk(piece, item.received_at))
            stage.held = Chunk(data, item.received_at) if data else None


async def _slow_close(stage: Stage, attrs: Mapping[str, int], rng: random.Random) -> None:
    while True:
        item = await stage.receive()
        if isinstance(item, Close):
            await asyncio.sleep(attrs["delay"] / 1000)
            stage.forward(item)
            return
        stage.forward(item)


async def _timeout(stage: Stage, attrs: Mapping[str, int], rng: random.Random) -> None:
    # Drop all data; close once no data came for `timeout` ms; with 0, hold the line forever.
    timeout_s = attrs["timeout"] / 1000
    while True:
        try:
            if timeout_s > 0:
                item = await asyncio.wait_for(stage.receive(), timeout_s)
            else:
                item = await stage.receive()
        except TimeoutError:
            stage.send(Close())
            return
        if isinstance(item, Close):
            stage.forward(item)
            return
        stage.held = None  # dropped on the floor


async def _reset_peer(stage: Stage, attrs: Mapping[str, int], rng: random.Random) -> None:
    # On the first data (or close), wait `timeout` ms, then reset the connection (RST).
    await stage.receive()
    await asyncio.sleep(attrs["timeout"] / 1000)
    stage.held = None
    stage.send(Close(reset=True))


def slice_points(size: int, average_size: int, size_variation: int, rng: random.Random) -> list[int]:
    """Sizes of the pieces a chunk of ``size`` bytes is cut into (each <= average + variation)."""
    if size - average_size <= size_variation:
        return [size]
    offset = rng.randint(-size_variation, size_variation - 1) if size_variation > 0 else 0
    middle = size // 2 + offset
    return slice_points(middle, average_size, size_variation, rng) + slice_points(
        size - middle, average_size, size_variation, rng
    )


async def _slicer(stage: Stage, attrs: Mapping[str, int], rng: random.Random) -> None:
    # Cut chunks into pieces of about average_size bytes, `delay` microseconds apart.
    delay_s = attrs["delay"] / 1_000_000
    while True:
        item = await stage.receive()
        if isinstance(item, Close):
            stage.forward(item)
            return
        data = item.data
        for piece_size in slice_points(len(data), attrs["average_size"], attrs["size_variation"], rng):
            piece, data = data[:piece_size], data[piece_size:]
            stage.send(Chunk(piece, item.received_at))
            stage.held = Chunk(data, item.received_at) if data else None
            await asyncio.sleep(delay_s)


async def _limit_data(stage: Stage, attrs: Mapping[str, int], rng: random.Random) -> None:
    # Close the stream once `bytes` bytes went through; the count survives toxic updates.
    limit = attrs["bytes"]
    while True:
        item = await stage.receive()
        if isinstance(item, Close):
            stage.forward(item)
            return
        remaining = max(limit - stage.bytes_passed, 0)
        piece = item.data[:remaining]
        if piece:
            stage.send(Chunk(piece, item.received_at))
            stage.bytes_passed += len(piece)
        stage.held = None
        if stage.bytes_passed >= limit:
            stage.send(Close())
            return


def _validate_slicer(attrs: Mapping[str, int]) -> str | None:
    if attrs["average_size"] < 1:
        return "slicer: average_size must be >= 1 byte"
    if attrs["size_variation"] >= attrs["average_size"]:
        return "slicer: size_variation must be smaller than average_size"
    return None


TOXIC_TYPES: Final[Mapping[str, ToxicType]] = {
    kind.name: kind
    for kind in (
        ToxicType("latency", ("latency", "jitter"), _latency),
        ToxicType("bandwidth", ("rate",), _bandwidth),
        ToxicType("slow_close", ("delay",), _slow_close),
        ToxicType("timeout", ("timeout",), _timeout, closes_on_removal=True),
        ToxicType("reset_peer", ("timeout",), _reset_peer),
        ToxicType("slicer", ("average_size", "size_variation", "delay"), _slicer, validate=_validate_slicer),
        ToxicType("limit_data", ("bytes",), _limit_data),
    )
}


# -- parsing --------------------------------------------------------------------------------------
def parse_toxic(body: object) -> ToxicSpec:
    """Build a toxic from a create request; ``ApiError`` (400) says what is wrong and what is valid."""
    if not isinstance(body, dict):
        raise ApiError("bad request body: expected a JSON object", 400)
    kind_name = body.get("type")
    kind = TOXIC_TYPES.get(kind_name) if isinstance(kind_name, str) else None
    if kind is None:
        raise ApiError(f"invalid toxic type: {kind_name!r} (valid: {', '.join(sorted(TOXIC_TYPES))})", 400)
    stream = body.get("stream", "downstream")
    if stream not in STREAMS:
        raise ApiError(f"stream was invalid, can be either upstream or downstream (got {stream!r})", 400)
    name = body.get("name") or f"{kind.name}_{stream}"
    if not isinstance(name, str):
        raise ApiError(f"bad request body: name must be a string, got {name!r}", 400)
    toxicity = _parse_toxicity(body.get("toxicity", 1.0))
    attributes = parse_attributes(kind, body.get("attributes") or {}, dict.fromkeys(kind.attributes, 0))
    return ToxicSpec(name, kind.name, stream, toxicity, attributes)


def apply_update(toxic: ToxicSpec, body: object) -> ToxicSpec:
    """A toxic with the attributes and toxicity of an update request merged in."""
    if not isinstance(body, dict):
        raise ApiError("bad request body: expected a JSON object", 400)
    toxicity = _parse_toxicity(body.get("toxicity", toxic.toxicity))
    attributes = parse_attributes(toxic.kind, body.get("attributes") or {}, dict(toxic.attributes))
    return ToxicSpec(toxic.name, toxic.type, toxic.stream, toxicity, attributes)


def parse_attributes(kind: ToxicType, raw: object, base: dict[str, int]) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise ApiError(f"bad request body: attributes must be an object, got {raw!r}", 400)
    valid = ", ".join(kind.attributes)
    for key, value in raw.items():
        if key not in kind.attributes:
            raise ApiError(f"bad request body: {kind.name} has no attribute {key!r} (valid: {valid})", 400)
        integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not integral or value < 0:
            raise ApiError(
                f"bad request body: {kind.name}.{key} must be a non-negative integer, got {value!r}", 400
            )
        base[key] = int(value)
    problem = kind.validate(base)
    if problem is not None:
        raise ApiError(f"bad request body: {problem}", 400)
    return base


def _parse_toxicity(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ApiError(f"bad request body: toxicity must be a number from 0 to 1, got {value!r}", 400)
    return float(value)
