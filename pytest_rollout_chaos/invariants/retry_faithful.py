"""``retry_faithful``: a retried request asks for what the attempt it replaces asked for.

A collector retries a row's ``/run`` (gym style) or a model call (native style) after NaN
logprobs, an error or a timeout. The retry must be the same draw again: the same sampling
parameters (temperature, top_p, the token limit, stop...) over the same prompt (the messages or
input, the tools). One that "shakes off" a bad sample by sampling hotter, rebuilds the request
from defaults and drops the token limit, or rebuilds the prompt without the tools hands the
trainer a sample from another distribution than the one it scores (NeMo RL divides the logits by
the generation temperature when it recomputes logprobs), and nothing fails where it happened.

Judged from the fault layer's record alone: the ``invoke`` of each request a collector sent for
a known row holds its sampling parameters and a digest per part of its prompt
(``servers.faultlayer.asked``). In gym style every ``/run`` of a row is an attempt of that row;
in native style the model calls of a row that hold as many assistant messages are attempts of one
turn (a model call with no chat messages cannot be placed and is left out). Each attempt is held
against the one before it. A resend by NeMo Gym's own transport (``sends.collector_sends``) is
held too, but is no retry of the collector's. With no retry of the collector's on record there
is nothing to judge: NOT_JUDGED.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict
from pytest_rollout_chaos.invariants.sends import Span, collector_sends, spans, turn_of
from pytest_rollout_chaos.invariants.served import MODEL_CALL_OPS, RUN_OP

_ABSENT: Final = object()  # a parameter or part one of the two requests did not send


class RetryFaithful:
    name: ClassVar[str] = "retry_faithful"

    def check(self, observation: Observation) -> Verdict:
        sent = [span for span in spans(observation.history) if span.from_collector]
        runs = [span for span in sent if span.op == RUN_OP]
        style = "/run" if runs else "model call"
        requests = runs or [span for span in sent if span.op in MODEL_CALL_OPS]
        own = {span.request_id for span in collector_sends(requests)}
        attempts: dict[tuple[int, int | None], list[Span]] = {}
        for span in requests:
            key = _attempt_of(span, native=not runs)
            if key is not None:
                attempts.setdefault(key, []).append(span)
        retries = 0
        problems: list[str] = []
        for (row, turn), tried in sorted(attempts.items()):
            for number, (before, retry) in enumerate(itertools.pairwise(tried), start=2):
                retries += retry.request_id in own
                where = f"row {row}" + (f", turn {turn}" if turn is not None else "")
                problems += [
                    f"{where}: attempt {number}'s {style} against attempt {number - 1}'s: {change}"
                    for change in changes(before.invoke.data, retry.invoke.data)
                ]
        if not problems and not retries:
            recorded = sum(len(tried) for tried in attempts.values())
            return not_judged(
                self.name,
                f"no retry to judge: the record holds {recorded} {style}s of the collector's that say what "
                "they asked for, none a retry of the collector's of an earlier one",
            )
        if not problems:
            rows = sorted({row for (row, _), tried in attempts.items() if len(tried) > 1})
            return verdict(
                self.name,
                Status.PASS,
                f"{retries} retried {style}s (rows {rows}) asked for the sampling parameters and the prompt "
                "of the attempt each replaced",
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"{len(problems)} retried {style}s asked for another sample than the attempt they "
                    f"replaced ({problems[0].partition(': ')[2]}): the trainer scores a sample drawn "
                    "from another distribution, or for another prompt, than the one it computes logprobs for"
                ),
                expected=(
                    "each retry sends the sampling parameters (temperature, top_p, the token limit, stop, "
                    "...) and the prompt (input or messages, tools) of the attempt it replaces"
                ),
            ),
            problems,
        )


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Each sampling parameter or prompt part that differs between two recorded ``invoke``s."""
    found = [
        f"{name} {_shown(was)} -> {_shown(now)}"
        for name, was, now in _differences(before.get("sampling"), after.get("sampling"))
    ]
    found += [
        f"prompt {name} {_shown(was)} -> {_shown(now)}"
        for name, was, now in _differences(before.get("prompt"), after.get("prompt"))
    ]
    return found


def _attempt_of(span: Span, *, native: bool) -> tuple[int, int | None] | None:
    """The row (and in native style the turn) a request is an attempt of; None if unknown."""
    data = span.invoke.data
    if span.row is None or not isinstance(data.get("prompt"), Mapping):
        return None  # not recorded with what it asked for
    return turn_of(span) if native else (span.row, None)


def _differences(before: object, after: object) -> Sequence[tuple[str, object, object]]:
    was = before if isinstance(before, Mapping) else {}
    now = after if isinstance(after, Mapping) else {}
    pairs = [(name, was.get(name, _ABSENT), now.get(name, _ABSENT)) for name in {**was, **now}]
    return [(name, old, new) for name, old, new in pairs if old != new]


def _shown(value: object) -> str:
    return "not sent" if value is _ABSENT else repr(value)
