"""Which row a request belongs to, for requests that do not say so themselves.

Only the collector's ``/run`` (and what our own agent forwards) carries ``_rowidx``. A policy
request from a real ``vllm_model`` server, a ``/tokenize`` call or a native-style chat request
carries no row at all, so the layer ties them to rows from what the harness knows and what it
has seen pass, in this order:

1. ``_rowidx`` in the JSON body;
2. a session cookie first set in the answer to a request of that row (NeMo Gym's resources
   server sets one in ``/seed_session``, and the agent sends it with every later call);
3. a trajectory's session header (``X-Session-ID``, which SkyRL's inference client sends with
   every model call of one trajectory for session-aware routing), once a request that carried
   the same header also carried ``_rowidx`` (the skyrl adapter's environment seeds its session
   so): SkyRL's token-in, token-out model calls carry no text to tie them by;
4. the row's prompt: the text of the last user message of the row's
   ``responses_create_params.input``, found as a string anywhere in the request body (chat
   ``messages``, Responses ``input``, a ``/tokenize`` request). Rows are learnt from every
   request body that carries ``_rowidx`` and the input, and can be registered up front
   (native style sends no ``/run``).

Rows that share a prompt (several generations per prompt) are told apart by what the model
answered each of them earlier: assistant text seen in an answer to a row's request, found again
in a later request, names that row. A first turn among such rows goes to the lowest row that
has had no first turn yet on that link and route: one turn is several requests (a chat
completion, then the ``/tokenize`` of the same messages), each a first turn of its own kind.
Whatever is still ambiguous gets no row, so a ``row`` rule does not fire on it: a fault that
hits nothing is visible, a fault that hits the wrong row is not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from http.cookies import CookieError, SimpleCookie
from typing import Any, Final

_MAX_STRINGS: Final = 4096  # strings read from one body; a row's prompt comes early in it
_MIN_PROMPT_CHARS: Final = 8  # a shorter text ("hi") would tie unrelated requests to a row
SESSION_HEADER: Final = "X-Session-ID"


class RowIndex:
    """Prompts, cookies and answers seen per row; forgotten on ``clear`` (each scenario)."""

    def __init__(self) -> None:
        self._by_prompt: dict[str, list[int]] = {}
        self._by_cookie: dict[str, int] = {}
        self._by_session: dict[str, int] = {}
        # a text several rows produced (the same tool call, greedy decoding) names all of them
        self._by_answer: dict[str, set[int]] = {}
        self._first_turns: set[tuple[int, str]] = set()  # (row, stream)

    def clear(self) -> None:
        self._by_prompt.clear()
        self._by_cookie.clear()
        self._by_session.clear()
        self._by_answer.clear()
        self._first_turns.clear()

    def empty(self) -> bool:
        """Nothing learnt: only a request's own ``_rowidx`` can name its row."""
        return not (self._by_prompt or self._by_cookie or self._by_session or self._by_answer)

    def register(self, row: Mapping[str, Any]) -> bool:
        """Learn a row (``_rowidx`` and its input) so requests with its prompt can be tied to it."""
        index = row.get("_rowidx")
        if not isinstance(index, int) or isinstance(index, bool):
            return False
        prompt = row_prompt(row)
        if prompt is None:
            return False
        rows = self._by_prompt.setdefault(prompt, [])
        if index not in rows:
            rows.append(index)
            rows.sort()
        return True

    def row_of(
        self, document: Any, cookie_header: str | None, *, stream: str = "", session: str | None = None
    ) -> int | None:
        """The row of a request with this JSON body, ``Cookie`` and ``X-Session-ID`` headers, or None.

        ``stream`` names the kind of request (its link and route); first turns count per kind.
        """
        if isinstance(document, dict):
            own = document.get("_rowidx")
            if isinstance(own, int) and not isinstance(own, bool):
                self.register(document)
                if session:
                    self._by_session[session] = own
                return own
        if session and session in self._by_session:
            return self._by_session[session]
        for pair in _cookie_pairs(cookie_header):
            if pair in self._by_cookie:
                return self._by_cookie[pair]
        if not self._by_prompt or document is None:
            return None
        candidates: list[int] = []
        answers: set[int] = set()
        for text in _strings(document):
            rows = self._by_prompt.get(text)
            if rows is not None:
                candidates.extend(row for row in rows if row not in candidates)
            answers.update(self._by_answer.get(text, ()))
        if len(candidates) == 1:
            return candidates[0]
        return self._disambiguate(candidates, answers, stream)

    def _disambiguate(self, candidates: list[int], answers: set[int], stream: str) -> int | None:
        known = [row for row in candidates if row in answers]
        if len(known) == 1:
            return known[0]
        if answers:
            return None  # a later turn of a row we cannot tell apart
        for row in sorted(candidates):
            if (row, stream) not in self._first_turns:
                self._first_turns.add((row, stream))
                return row
        return None

    def learn_answer(self, row: int, document: Any, set_cookies: Iterable[str]) -> None:
        """Remember what the answer to a row's request showed: its cookies and assistant text."""
        self.learn(row, assistant_texts(document), set_cookies)

    def learn(self, row: int, texts: Iterable[str], set_cookies: Iterable[str]) -> None:
        """``learn_answer`` with the answer's assistant texts already read (``assistant_texts``)."""
        for header in set_cookies:
            for pair in _cookie_pairs(header, set_cookie=True):
                self._by_cookie[pair] = row
        for text in texts:
            self._by_answer.setdefault(text, set()).add(row)


def row_prompt(row: Mapping[str, Any]) -> str | None:
    """The text of the last user message of a NeMo Gym row's input, or None."""
    params = row.get("responses_create_params")
    messages = params.get("input") if isinstance(params, dict) else None
    if isinstance(messages, str):
        return messages.strip() if len(messages.strip()) >= _MIN_PROMPT_CHARS else None
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            text = _message_text(message.get("content"))
            if text is not None and len(text) >= _MIN_PROMPT_CHARS:
                return text
    return None


def assistant_texts(document: Any) -> list[str]:
    """Texts a model produced in an answer: chat message content and tool-call arguments, or
    Responses output text and function-call arguments (long enough to name one row)."""
    found: list[str] = []
    if not isinstance(document, dict):
        return found
    for choice in document.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict):
            found.append(str(message.get("content") or ""))
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    found.append(str(function.get("arguments") or ""))
    output = document.get("output")
    if isinstance(output, list):
        for item in output:
            if not isinstance(item, dict):
                continue
            found.append(str(item.get("arguments") or ""))
            found.append(_message_text(item.get("content")) or "")
    return [text.strip() for text in found if len(text.strip()) >= _MIN_PROMPT_CHARS]


def _message_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [part.get("text") for part in content if isinstance(part, dict)]
        texts = [text for text in parts if isinstance(text, str)]
        return "".join(texts).strip() if texts else None
    return None


def _strings(document: Any) -> Iterator[str]:
    """Every string in a JSON document (stripped), depth first, at most ``_MAX_STRINGS``."""
    stack = [document]
    seen = 0
    while stack and seen < _MAX_STRINGS:
        node = stack.pop()
        if isinstance(node, str):
            seen += 1
            yield node.strip()
        elif isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
        # a text part of a multi-part message is one string; the prompt may be split over parts
        if isinstance(node, list) and node and all(isinstance(part, dict) for part in node):
            joined = _message_text(node)
            if joined:
                yield joined


def _cookie_pairs(header: str | None, *, set_cookie: bool = False) -> list[str]:
    """``name=value`` pairs of a ``Cookie`` (or one ``Set-Cookie``) header."""
    if not header:
        return []
    cookie = SimpleCookie()
    try:
        cookie.load(header)
    except CookieError:
        return []
    pairs = [f"{name}={morsel.value}" for name, morsel in cookie.items()]
    return pairs[:1] if set_cookie else pairs
