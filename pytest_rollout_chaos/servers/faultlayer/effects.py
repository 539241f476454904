"""The fault layer's effects, declared once: each one's name, phase, parameters and their words.

A rule names one effect (``http_error``, ``delay``, ...) and carries that effect's parameters;
every rule also carries the match keys (``MATCH``). Three readers share this table, so a
parameter, its default, bounds, choices and help are written here and nowhere else:

- ``rules`` parses and checks a rule body against it (types, defaults, bounds, choices);
- ``hits`` applies a rule's effect, which ``proxy`` runs in its ``phase``;
- the semantic faults (``faults/_layer_fault.py`` and one module per kind, a layer above) read
  their parameters' defaults, bounds and help from it, and their choices as the ``Literal``
  aliases below; ``tests/faults/test_layer_effects.py`` checks that each fault's parameters
  are its effect's.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

# When an effect acts on a request it hits: ``hold`` before forwarding it, ``answer`` in the
# server's place (the server never sees the request), ``rewrite`` the server's answer.
Phase = Literal["hold", "answer", "rewrite"]

LogprobShape = Literal["nan", "null", "inf", "http_500"]
DriftMode = Literal["replace", "merge", "end_of_turn"]
MalformedStyle = Literal[
    "truncate", "garble", "emptied", "no_output", "no_response", "no_prompt_ids", "short_logprobs", "cut_off"
]
LOGPROB_SHAPES: Final[tuple[str, ...]] = typing.get_args(LogprobShape)
DRIFT_MODES: Final[tuple[str, ...]] = typing.get_args(DriftMode)
MALFORMED_STYLES: Final[tuple[str, ...]] = typing.get_args(MalformedStyle)

_NUMBER: Final = (int, float)


@dataclass(frozen=True, slots=True)
class EffectParam:
    """One parameter of an effect (or one match key): JSON types, default, help, bounds, choices.

    ``default`` is ``...`` when the parameter is required. ``expected`` words the valid values
    for error messages, formatted with ``minimum`` and ``maximum``; empty means the usual words
    (``a number >= 0``, ``an integer in [0, 1]``).
    """

    name: str
    types: tuple[type, ...]
    default: object
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    expected: str = ""

    def expected_values(self) -> str:
        """The valid values in words: ``one of a, b``, ``a number >= 0``, ``an integer in [0, 9]``."""
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        if self.expected:
            return self.expected.format(minimum=self.minimum, maximum=self.maximum)
        noun = "a number" if float in self.types else "an integer"
        if self.minimum is not None and self.maximum is not None:
            return f"{noun} in [{self.minimum:g}, {self.maximum:g}]"
        if self.minimum is not None:
            return f"{noun} >= {self.minimum:g}"
        return noun

    def fits(self, value: object) -> bool:
        """Is ``value`` (already of one of ``types``) among the choices and within the bounds?"""
        if self.choices:
            return value in self.choices
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return True
        if self.minimum is not None and value < self.minimum:
            return False
        return self.maximum is None or value <= self.maximum


@dataclass(frozen=True, slots=True)
class Effect:
    """One effect a rule can arm: its name, when it acts, and its parameters in order."""

    name: str
    phase: Phase
    params: tuple[EffectParam, ...] = ()

    def parameter(self, name: str) -> EffectParam:
        """The parameter called ``name``; a ``KeyError`` listing the known ones otherwise."""
        for spec in self.params:
            if spec.name == name:
                return spec
        known = ", ".join(spec.name for spec in self.params) or "none"
        raise KeyError(f"effect {self.name!r} has no parameter {name!r} (known: {known})")


def _choices(name: str, alias: object, default: str, help: str) -> EffectParam:
    return EffectParam(name, (str,), default, help, choices=typing.get_args(alias))


EFFECTS: Final[Mapping[str, Effect]] = {
    effect.name: effect
    for effect in (
        Effect(
            "http_error",
            "answer",
            (
                EffectParam(
                    "status",
                    (int,),
                    500,
                    "HTTP status to answer",
                    minimum=400,
                    maximum=599,
                    expected="an HTTP error status {minimum}..{maximum}",
                ),
                EffectParam(
                    "body",
                    (str, dict, list, type(None)),
                    None,
                    "response body; empty = an OpenAI-style JSON error",
                ),
            ),
        ),
        Effect(
            "delay",
            "hold",
            (
                EffectParam("delay_ms", _NUMBER, 0, "fixed delay per call", minimum=0),
                EffectParam("per_item_ms", _NUMBER, 0, "extra delay per item in the batch", minimum=0),
            ),
        ),
        Effect(
            "nan_logprobs",
            "rewrite",
            (
                _choices("shape", LogprobShape, "nan", "how the bad value appears"),
                EffectParam(
                    "token_index",
                    (int, type(None)),
                    None,
                    "only this position of each logprob list; empty = all",
                ),
            ),
        ),
        Effect(
            "logprob_drift",
            "rewrite",
            (
                EffectParam(
                    "drift_nats",
                    _NUMBER,
                    1.0,
                    "subtracted from every logprob of the answer: finite values that disagree with the model",
                    minimum=0,
                ),
            ),
        ),
        Effect(
            "prefix_drift",
            "rewrite",
            (
                _choices(
                    "mode",
                    DriftMode,
                    "replace",
                    "replace one id, merge two ids into one, or (end_of_turn) re-render every end of turn "
                    "with another id than the EOS the model stopped on",
                ),
                EffectParam(
                    "replacement_token_id",
                    (int, type(None)),
                    None,
                    "the id put in; empty = a neighbouring id",
                ),
            ),
        ),
        Effect(
            "malformed_json",
            "rewrite",
            (
                _choices(
                    "style",
                    MalformedStyle,
                    "truncate",
                    "how the body breaks: cut in half or garbled (it no longer parses), or emptied (it "
                    "parses, but every list in it is empty: the envelope without its content); or it "
                    "parses with one part unreadable: no_output (every output list removed), "
                    "no_response (the /run result's response object removed), "
                    "no_prompt_ids (the last model call's item without its prompt_token_ids), "
                    "short_logprobs (every logprob list one value short of its generated tokens); or "
                    "cut_off: the head promises the whole body, half of it is sent, then the connection "
                    "closes (a server or proxy dying mid-write)",
                ),
            ),
        ),
        Effect(
            "hang",
            "hold",
            (
                EffectParam(
                    "max_hang_s",
                    (*_NUMBER, type(None)),
                    None,
                    "release after this long even if not healed; empty = never",
                    minimum=0,
                ),
            ),
        ),
        Effect(
            "trajectory_exception",
            "answer",
            (EffectParam("message", (str,), "injected trajectory exception", "the exception's message"),),
        ),
    )
}

# The keys of a rule's ``match``: which requests it hits (``rules`` says how they combine).
MATCH: Final[tuple[EffectParam, ...]] = (
    EffectParam(
        "route",
        (str,),
        None,
        "request path to hit (exact; a prefix when it ends with / or *); default per kind",
        expected="a path starting with '/'",
    ),
    EffectParam("row", (int,), None, "only requests of this _rowidx", minimum=0),
    EffectParam("nth", (int,), None, "only the nth matching request (the first of every)", minimum=1),
    EffectParam("every", (int,), None, "then every k-th matching request", minimum=1),
    EffectParam("probability", _NUMBER, None, "seeded chance per matching request", minimum=0.0, maximum=1.0),
    EffectParam("count", (int,), None, "at most this many hits", minimum=1),
)


def in_phase(phase: Phase) -> tuple[str, ...]:
    """The names of the effects that act in ``phase``, in declaration order."""
    return tuple(name for name, effect in EFFECTS.items() if effect.phase == phase)
