"""What the servers saw, per row: the fault layer's record of each ``/run`` and model call.

The fault layer sits in front of every server and writes one event per request under the
server's source: ``invoke``, then ``ok``/``fail`` with the HTTP status, or ``info`` when the
connection was cut; an ``ok`` lists a ``history.fingerprint`` per model call its answer
generated (``generations``), a ``history.logprob_digest`` of each one's logprobs
(``logprobs``) and, for a ``/run``, its ``reward``, a fingerprint of the prompt ids each model
call was sent (``prompts``) and the model calls whose prompt ids drifted (``drifted``, then every
call's prompt ids in full under ``prompt_ids``). That record is the judge's witness,
independent of the collector: in gym style the agents' ``/run`` answers (one per attempt,
``_rowidx`` in the request), in native style the policy's chat, completions or token-in,
token-out ``/inference/v1/generate`` answers on the collector's own link (tied to a row by its
prompt or its trajectory's session header; several rows sharing a prompt may leave some untied),
each with the fingerprint of the prompt ids a token-in call was sent (its ``invoke``'s ``sent_ids``).
A policy's answer also says why each generation stopped (``finishes``, its ``finish_reason``),
read by ``finished`` and ``finishes`` whatever the style and link, by the generation's fingerprint.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pytest_rollout_chaos.history import Event, History, fingerprint_length

RUN_OP = "POST /run"
MODEL_CALL_OPS = ("POST /v1/chat/completions", "POST /v1/completions", "POST /inference/v1/generate")
NATIVE_LINK_PREFIX = "collector->"


@dataclass(frozen=True, slots=True)
class Call:
    """One request the layer saw end: how, and what it generated (fingerprints, in order)."""

    kind: str
    status: int | None
    generations: tuple[str, ...]
    error: str | None
    logprobs: tuple[str, ...] = ()  # one ``history.logprob_digest`` per generation, when recorded
    reward: float | None = None  # a ``/run`` answer's reward
    t: float = 0.0  # when the request ended
    drifted: tuple[int, ...] = ()  # a ``/run`` answer's model calls whose prompt ids drifted
    prompts: tuple[str, ...] = ()  # a ``/run`` answer's prompt fingerprints, one per model call;
    # a token-in model call's own prompt
    prompt_ids: tuple[tuple[int, ...], ...] = ()  # and those prompts in full, when one drifted

    @property
    def succeeded(self) -> bool:
        return self.kind == "ok"

    def describe(self) -> str:
        if self.kind == "ok":
            lengths = [fingerprint_length(value) for value in self.generations]
            return f"HTTP {self.status} with {len(self.generations)} generations (token counts {lengths})"
        if self.kind == "fail":
            return f"HTTP {self.status}" + (f" ({self.error})" if self.error else "")
        return f"no answer ({self.error or 'connection cut'})"


@dataclass(slots=True)
class Served:
    """The record by row; ``style`` is None when the History holds no layer record at all."""

    style: Literal["gym", "native"] | None
    by_row: dict[int, list[Call]] = field(default_factory=dict)
    untied: list[Call] = field(default_factory=list)

    def calls(self, row: int) -> list[Call]:
        return self.by_row.get(row, [])

    @property
    def what(self) -> str:
        return "/run" if self.style == "gym" else "model call"


def served(history: History) -> Served:
    """Read the layer's ended ``/run`` requests (gym style), else its native model calls."""
    events = [event for event in history.events() if "link" in event.data]
    runs = [event for event in events if event.op == RUN_OP]
    if runs:
        return _by_row("gym", runs)
    calls = [
        event
        for event in events
        if event.op in MODEL_CALL_OPS and str(event.data["link"]).startswith(NATIVE_LINK_PREFIX)
    ]
    return _by_row("native", calls) if calls else Served(None)


def _by_row(style: Literal["gym", "native"], events: Sequence[Event]) -> Served:
    record = Served(style)
    sent = {
        event.request_id: _sent_ids(event) for event in events if event.kind == "invoke" and style == "native"
    }
    for event in events:
        if event.kind == "invoke":
            continue
        status = event.data.get("status")
        error = event.data.get("error") or event.data.get("effect")
        call = Call(
            kind=event.kind,
            status=status if isinstance(status, int) else None,
            generations=tuple(str(value) for value in event.data.get("generations") or ()),
            error=str(error) if error else None,
            logprobs=tuple(str(value) for value in event.data.get("logprobs") or ()),
            reward=_number(event.data.get("reward")),
            t=event.t,
            drifted=tuple(int(index) for index in event.data.get("drifted") or () if isinstance(index, int)),
            prompts=tuple(str(value) for value in event.data.get("prompts") or ())
            or sent.get(event.request_id, ()),
            prompt_ids=_id_lists(event.data.get("prompt_ids")),
        )
        row = event.data.get("row")
        if isinstance(row, int) and not isinstance(row, bool):
            record.by_row.setdefault(row, []).append(call)
        else:
            record.untied.append(call)
    return record


def _sent_ids(invoke: Event) -> tuple[str, ...]:
    """The fingerprint of the prompt ids a token-in model call of one prompt was sent; () for a
    call that sent messages, text or a batch (the layer records no ``sent_ids`` for those)."""
    ids = invoke.data.get("sent_ids")
    return (ids,) if isinstance(ids, str) and fingerprint_length(ids) is not None else ()


def _id_lists(value: object) -> tuple[tuple[int, ...], ...]:
    """Lists of token ids as recorded; () for anything else."""
    if not isinstance(value, list) or not all(isinstance(ids, list) for ids in value):
        return ()
    if not all(isinstance(token, int) and not isinstance(token, bool) for ids in value for token in ids):
        return ()
    return tuple(tuple(ids) for ids in value)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def finished(history: History) -> Iterator[tuple[str, str]]:
    """Each generation the policy answered, as (fingerprint, finish reason): the ``finish_reason``
    of each choice of every answered chat, completions or generate request the layer recorded
    (``stop``, ``length``, ...), whatever the link."""
    for event in history.events():
        reasons = event.data.get("finishes") if event.kind == "ok" and "link" in event.data else None
        if not isinstance(reasons, list):
            continue
        generations = event.data.get("generations") or ()
        for generated, reason in zip(generations, reasons, strict=False):
            if isinstance(reason, str):
                yield str(generated), reason


def finishes(history: History) -> dict[str, set[str]]:
    """Why the policy stopped each generation, by fingerprint (``finished``); a generation
    answered twice may hold two reasons."""
    found: dict[str, set[str]] = {}
    for generated, reason in finished(history):
        found.setdefault(generated, set()).add(reason)
    return found
