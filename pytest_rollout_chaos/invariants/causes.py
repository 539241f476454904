"""What the History recorded as a row's failure, and whether an error text names it.

``root_cause_visible`` holds an aborted rollout's ``error`` against these records of its row,
never against what the collector says of itself:

- the fault layer's ``fail`` of a request of the row: the HTTP status and the start of the
  error answer's body (``body``), and the fault kind when a rule answered in the server's place;
- the layer's ``info`` for a request of the row whose connection was cut: by the server (the
  connection words, or the server's name) or by the client going away first, the client's own
  deadline (a timeout word and the seconds);
- the layer's ``hook`` of a trajectory fault's rule on a request of the row: its kind, or the
  words of what it does (a NaN logprob, prefix drift, broken JSON, a hang: a deadline);
- the Gym client's ``fail`` of the row's ``/run``: the words of its error.

An error names a record when it carries what a person needs to find it again: the status and a
word of the body, the exception's words, "timeout" with the seconds. A text that names nothing
recorded ("row 3 aborted") names no cause, whatever its length.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.invariants.raise_has_cause import CLIENT_CLOSED

# Words too common in error texts to name anything on their own.
GENERIC_WORDS: Final = frozenset(
    {
        "aborted", "answer", "answered", "code", "detail", "error", "errors", "exception", "fail",
        "failed", "failure", "false", "from", "http", "https", "internal", "localhost", "message",
        "none", "null", "request", "result", "row", "rows", "server", "status", "that", "the",
        "this", "true", "type", "with", "while",
    }
)  # fmt: skip
TIMEOUT_WORDS: Final = ("timeout", "timed out", "deadline", "within")
# A number of seconds: "7.5 s", "30 seconds", or a limit whose name carries the unit ("timeout_s=7.5").
SECONDS: Final = re.compile(r"\d(?:[\d.]*)\s*(?:s|sec|secs|seconds)\b|_s\s*[=:]\s*\d")
CONNECTION_WORDS: Final = (
    "connect", "reset", "refused", "disconnect", "closed", "unreachable", "eof", "broken pipe",
    "cut off", "payload", "incomplete", "not ready",
)  # fmt: skip
# What each trajectory fault's effect looks like to a client that names it.
EFFECT_WORDS: Final[dict[str, tuple[str, ...]]] = {
    "nan_logprobs": ("nan", "inf", "logprob", "finite", "null"),
    "prefix_drift": ("prefix", "drift", "splice", "eos", "mismatch", "retokeniz"),
    # an answer that does not parse, parses with nothing in it (style: emptied), or with a part
    # unreadable (no output list, an item without prompt ids, fewer logprobs than tokens)
    "malformed_json": (
        "json",
        "malformed",
        "decode",
        "parse",
        "expecting",
        "unterminated",
        "delimiter",
        "unreadable",
        "no output",
        "empty",
        "logprob",
    ),
}
_WORD: Final = re.compile(r"[a-z][a-z0-9_]{3,}")
_URL: Final = re.compile(r"\w+://\S+")


@dataclass(frozen=True, slots=True)
class Cause:
    """One recorded failure of a row: how the record reads, and whether a text names it."""

    describe: str
    named_by: Callable[[str], bool]


def row_causes(events: Iterable[Event], row: int) -> list[Cause]:
    """Every failure the History recorded for ``row``, in time order."""
    found: list[Cause] = []
    for event in events:
        data = event.data
        if data.get("row") != row or isinstance(data.get("row"), bool):
            continue
        if "link" in data and event.op == "hook":
            effect = str(data.get("effect"))
            if effect in EFFECT_WORDS or effect == "hang":
                found.append(_hooked(effect, data.get("server")))
        elif "link" in data and event.kind == "fail":
            found.append(_http(data.get("status"), str(data.get("body") or ""), data.get("effect")))
        elif "link" in data and event.kind == "info" and data.get("error"):
            found.append(_cut(str(data["error"]), str(data.get("server") or "")))
        elif event.source == "collector" and event.op == "run" and event.kind == "fail" and data.get("error"):
            found.append(_words_of(f"the Gym client's /run failed: {data['error']}", str(data["error"])))
    return found


def _http(status: object, body: object, effect: object) -> Cause:
    text = _body_text(str(body))
    words = significant(text)
    kind = str(effect) if effect else None

    def named_by(error: str) -> bool:
        lowered = error.lower()
        if kind is not None and kind in lowered:
            return True
        return str(status) in error and (not words or any(word in lowered for word in words))

    by = f" (by the {kind} fault)" if kind else ""
    return Cause(f"HTTP {status}{by} with body {text[:120]!r}", named_by)


def _cut(error: str, server: str) -> Cause:
    if error == CLIENT_CLOSED:
        return Cause(f"no answer before the client gave up ({CLIENT_CLOSED})", timeout_named)

    def named_by(text: str) -> bool:
        lowered = text.lower()
        return any(word in lowered for word in CONNECTION_WORDS) or bool(server and server.lower() in lowered)

    return Cause(f"connection cut: {error[:160]}", named_by)


def _hooked(effect: str, server: object) -> Cause:
    if effect == "hang":
        held = f"the hang fault held the request on {server} (a client must give up on a deadline)"
        return Cause(held, timeout_named)
    words = EFFECT_WORDS[effect]

    def named_by(text: str) -> bool:
        lowered = text.lower()
        return effect in lowered or any(word in lowered for word in words)

    return Cause(f"the {effect} fault on {server}", named_by)


def _words_of(describe: str, error: str) -> Cause:
    words = significant(error)
    return Cause(describe[:200], lambda text: any(word in text.lower() for word in words))


def timeout_named(text: str) -> bool:
    """A timeout word and the seconds: ``no answer within request_timeout_s=7.5``."""
    lowered = text.lower()
    return any(word in lowered for word in TIMEOUT_WORDS) and SECONDS.search(lowered) is not None


def significant(text: str) -> set[str]:
    """The words of an error text that name something (lowercase, URLs and generic words out)."""
    return {word for word in _WORD.findall(_URL.sub(" ", text.lower())) if word not in GENERIC_WORDS}


def _body_text(body: str) -> str:
    """NeMo Gym answers an error with a JSON string; the text is the string itself."""
    try:
        decoded = json.loads(body)
    except ValueError:
        return body
    return decoded if isinstance(decoded, str) else body
