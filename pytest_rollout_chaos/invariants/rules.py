"""The rules the invariants judge by: finite logprobs, one prefix across turns, the splice a
drifted prompt owes, a visible root cause, logprobs that agree with the record.

The judge owns its rules. The reference collector applies the same rules to the rollouts it
builds, but with its own code (``collector/results.py``, ``collector/failures.py``) and never
imports these, so a bug in the collector's copy cannot also blind the judge: the invariant
still fails the rollout that slipped through. ``tests/invariants/test_rules.py`` checks
that both copies answer alike on a table of cases; ``test_boundary.py`` that nothing under
``invariants/`` imports collector internals.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator, Sequence
from typing import Final

from pytest_rollout_chaos.collector.protocol import Turn

# How far a handed-back logprob may be from the one recorded, per token: a float32 (or float16)
# copy of the model's value is still the model's value; a zeroed or invented one is not.
LOGPROB_TOLERANCE: Final = 1e-3

# Error texts that name no cause: what a trainer sees after a bare CancelledError or a wrapper.
UNINFORMATIVE: Final = frozenset({"", "cancellederror", "timeouterror", "exception", "error", "none"})


def finite(value: object) -> bool:
    """True for a real, finite number; NaN, Inf, None, strings and booleans are not logprobs."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def bad_logprob(turns: Sequence[Turn]) -> str | None:
    """Where the first logprob that is not a finite number is (or a count that does not match)."""
    for index, turn in enumerate(turns):
        logprobs, tokens = turn.generation_log_probs, turn.generation_token_ids
        if len(logprobs) != len(tokens):
            return f"turn {index} has {len(logprobs)} logprobs for {len(tokens)} generated tokens"
        position = next((at for at, value in enumerate(logprobs) if not finite(value)), None)
        if position is not None:
            return f"non-finite logprob {logprobs[position]!r} at turn {index}, token {position}"
    return None


def first_mismatch(ids: Sequence[int], prefix: Sequence[int]) -> int | None:
    """Index of the first position where ``ids`` does not continue ``prefix``; None if it does.

    When ``ids`` is shorter than ``prefix`` and agrees as far as it goes, the answer is
    ``len(ids)`` (the first position ``ids`` is missing).
    """
    for index, expected in enumerate(prefix):
        if index >= len(ids) or ids[index] != expected:
            return index
    return None


def prefix_mismatch(turns: Sequence[Turn]) -> str | None:
    """The first turn whose prompt does not start with the previous turn's prompt + generation."""
    for index in range(1, len(turns)):
        previous = turns[index - 1]
        expected = [*previous.prompt_token_ids, *previous.generation_token_ids]
        position = first_mismatch(turns[index].prompt_token_ids, expected)
        if position is not None:
            return (
                f"prefix mismatch at turn {index}: prompt ids differ from turn {index - 1}'s "
                f"prompt + generation at position {position} (of {len(expected)})"
            )
    return None


def splice_owed(model_prefix: Sequence[int], template_ids: Sequence[int]) -> list[int] | None:
    """The prompt an EOS-boundary splice builds from a drifted ``template_ids``: ``model_prefix``
    (the previous prompt + generation, as handed on), then what ``template_ids`` holds after the
    end of the assistant turn that closes it; None when no splice can be built.

    The end of turn is the id the previous generation stopped on (``model_prefix``'s last id),
    and the assistant turn's end in ``template_ids`` is the one with the same ordinal as that
    id's last occurrence in ``model_prefix`` (drift changes tokens inside turns, not how many turns
    there are). The stop id is read from the record, not from a tokenizer, so the judge needs none.
    """
    if not model_prefix:
        return list(template_ids)
    stop = model_prefix[-1]
    ordinal = sum(1 for token in model_prefix if token == stop)
    seen = 0
    for position, token in enumerate(template_ids):
        if token == stop:
            seen += 1
            if seen == ordinal:
                tail = list(template_ids[position + 1 :])
                return [*model_prefix, *tail] if tail else None
    return None


def chain(error: BaseException) -> Iterator[BaseException]:
    """``error``, then what caused it (``__cause__``, else ``__context__``), each exception once."""
    seen: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and not any(link is earlier for earlier in seen):
        seen.append(link)
        yield link
        link = link.__cause__ if link.__cause__ is not None else link.__context__


def informative(text: str | None) -> bool:
    """True when an error text names something: not empty, not a bare exception class word."""
    return text is not None and text.strip().lower().rstrip(":") not in UNINFORMATIVE


def hides_root_cause(error: BaseException) -> bool:
    """True for a bare ``CancelledError``, or when nothing in the cause chain says what failed."""
    if isinstance(error, asyncio.CancelledError):
        return True
    return not any(informative(str(link)) for link in chain(error))


def digests_agree(recorded: str, handed: str) -> bool:
    """True when two ``history.logprob_digest`` values describe the same logprobs.

    The same count, and either the same first non-finite position, or both finite with sums
    within ``LOGPROB_TOLERANCE`` per token (the weighted sum within its share of it).
    """
    mine, theirs = recorded.split(":"), handed.split(":")
    if mine[0] != theirs[0] or len(mine) != len(theirs):
        return False
    if len(mine) == 2:  # both non-finite somewhere: where
        return mine[1] == theirs[1]
    count = int(mine[0])
    tolerance = LOGPROB_TOLERANCE * count + 1e-6
    weighted_tolerance = LOGPROB_TOLERANCE * count * (count + 1) / 2 + 1e-6
    return (
        abs(float(mine[1]) - float(theirs[1])) <= tolerance
        and abs(float(mine[2]) - float(theirs[2])) <= weighted_tolerance
    )
