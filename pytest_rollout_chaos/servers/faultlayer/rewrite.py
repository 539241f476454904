"""Response-body rewrites for the semantic fault effects: bad or drifted logprobs, prefix drift, broken JSON.

Pure functions over decoded JSON (or bytes), so they are easy to reason about and test. The
walkers look for the field names that vLLM, NeMo Gym and the servers of this stack use, wherever
they are nested: chat ``choices[].logprobs.content[].logprob``, completions
``choices[].logprobs.token_logprobs``, Gym output items' ``generation_log_probs`` (also inside
``/run`` results); for prefix drift, prompt ids in ``prompt_token_ids`` or a ``/tokenize``
answer's ``tokens``, and generated ids in ``token_ids``, ``generation_token_ids`` or chat
logprob tokens spelled ``token_id:N`` (vLLM's ``return_tokens_as_token_ids``). What an answer
says, read for the History and left as it is, ``answers`` reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from pytest_rollout_chaos.servers.faultlayer.answers import TOKEN_ID_PREFIX

LOGPROB_LIST_KEYS: Final = ("token_logprobs", "generation_log_probs")
GENERATED_IDS_KEYS: Final = ("token_ids", "generation_token_ids")
PROMPT_IDS_KEYS: Final = ("prompt_token_ids", "tokens")

_SHAPE_VALUES: Final[dict[str, float | None]] = {"nan": float("nan"), "null": None, "inf": float("inf")}


def dumps(value: Any) -> bytes:
    """Encode like Python's json does by default: NaN and Infinity as bare literals."""
    return json.dumps(value, allow_nan=True).encode()


def rewrite_logprobs(document: Any, shape: str, token_index: int | None) -> int:
    """Replace logprob values in place with NaN, null or Infinity; return how many changed.

    ``token_index`` picks one position per logprob list (clamped to its end); None means all.
    """
    bad = _SHAPE_VALUES[shape]
    changed = 0
    for values, key in logprob_lists(document):
        if not values:
            continue
        positions = range(len(values)) if token_index is None else [min(token_index, len(values) - 1)]
        for position in positions:
            if key is None:
                values[position] = bad
            else:
                values[position][key] = bad
            changed += 1
    return changed


def shift_logprobs(document: Any, drift_nats: float) -> int:
    """Subtract ``drift_nats`` from every numeric logprob value in place; return how many changed.

    The values stay finite and below 0: logprobs a model could have reported, that are not the
    ones it computed (an inference engine whose numerics drift from the trainer's)."""
    changed = 0
    for values, key in logprob_lists(document):
        for index, value in enumerate(values):
            if key is None:
                values[index] = value - drift_nats
            elif isinstance(value.get(key), int | float):
                value[key] = value[key] - drift_nats
            else:
                continue
            changed += 1
    return changed


def logprob_lists(document: Any) -> Iterator[tuple[list[Any], str | None]]:
    """Every list of logprobs in ``document``, wherever nested, with the key its items hold the value
    under: a list of numbers (``token_logprobs``, ``generation_log_probs``) with None, a chat
    ``logprobs.content`` list with ``"logprob"``."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key in LOGPROB_LIST_KEYS and isinstance(value, list) and _all_numbers(value):
                yield value, None
            elif key == "content" and isinstance(value, list) and _is_chat_logprob_list(value):
                yield value, "logprob"
            else:
                yield from logprob_lists(value)
    elif isinstance(document, list):
        for item in document:
            yield from logprob_lists(item)


def drift_prompt_ids(
    document: Any,
    seen_generations: Sequence[list[int]],
    mode: str,
    replacement_token_id: int | None,
) -> int:
    """Change an earlier prompt token in every list of prompt ids; return how many lists changed.

    A non-append-only chat template re-renders history, so an id that an earlier turn
    generated comes back different (replaced) or merged with its neighbour. When a generation
    seen earlier by this server occurs inside the prompt, the drift lands in it; otherwise it
    lands in the middle of the prompt, which is still history. Remembering this answer's own
    generations for later turns is the caller's job (``LayerState.observe_generations`` sees
    every answer once).

    ``end_of_turn`` is the drift splicing cannot repair: the template closes turns with another
    id than the one the model stopped on, so every occurrence of that stop id (the id the
    generations seen earlier end with) is replaced and no EOS boundary is left to cut at. A
    prompt holding no such id is left alone and not counted.
    """
    changed = 0
    stop_id = _stop_id(seen_generations) if mode == "end_of_turn" else None

    def visit(node: Any) -> None:
        nonlocal changed
        if isinstance(node, dict):
            for key in PROMPT_IDS_KEYS:
                prompt = node.get(key)
                if not (isinstance(prompt, list) and len(prompt) >= 2 and _all_ints(prompt)):
                    continue
                if mode != "end_of_turn":
                    _drift_one(prompt, _drift_position(prompt, seen_generations), mode, replacement_token_id)
                    changed += 1
                elif stop_id is not None and _replace_all(prompt, stop_id, replacement_token_id):
                    changed += 1
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(document)
    return changed


def empty_lists(document: Any) -> int:
    """Empty every list in ``document`` in place (the outermost ones: what they held goes with
    them); how many held something. What is left parses and keeps its envelope, as a ``/run``
    result ``{"response": {"output": []}, "reward": ...}`` does when NeMo Gym answers a context
    overflow with an empty response."""
    emptied = 0

    def visit(node: Any) -> None:
        nonlocal emptied
        values = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for value in values:
            if isinstance(value, list):
                emptied += bool(value)
                value.clear()
            else:
                visit(value)

    if isinstance(document, list):
        emptied += bool(document)
        document.clear()
    else:
        visit(document)
    return emptied


def objects(document: Any) -> list[dict[str, Any]]:
    """Every object in ``document``, outermost first, in document order; listed before a caller
    changes any of them, so a rewrite may delete what it walks."""
    found: list[dict[str, Any]] = []
    pending = [document]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            found.append(node)
            pending.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            pending.extend(reversed(node))
    return found


def drop_output(document: Any) -> int:
    """Remove every ``output`` list from the object holding it, in place; how many went. A ``/run``
    result keeps its ``response`` (id, status, usage) with no ``output`` at all, the shape a failed
    or summarised response takes (NeMo RL #2367 reads such results)."""
    holders = [node for node in objects(document) if isinstance(node.get("output"), list)]
    for holder in holders:
        del holder["output"]
    return len(holders)


def drop_response(document: Any) -> int:
    """Remove the ``response`` object of a ``/run`` result, in place (1, or 0 when it has none): the
    answer keeps its ``reward`` and whatever else beside it, the envelope an agent sends when it
    reports its own failure with a 200, or a result of another schema version read by this one."""
    if isinstance(document, dict) and "response" in document:
        del document["response"]
        return 1
    return 0


def drop_last_prompt_ids(document: Any) -> int:
    """The last object carrying both generated ids and ``prompt_token_ids`` loses the prompt ids,
    in place (1, or 0 when none carries both): one model call of a ``/run`` result left with its
    generation and no readable prompt, as an agent that builds an item itself sends (NeMo Gym
    PR #2254). Earlier calls keep theirs, so a reader that skips the item loses a turn."""
    carriers = [
        node
        for node in objects(document)
        if "prompt_token_ids" in node and any(isinstance(node.get(key), list) for key in GENERATED_IDS_KEYS)
    ]
    if not carriers:
        return 0
    del carriers[-1]["prompt_token_ids"]
    return 1


def shorten_logprobs(document: Any) -> int:
    """Drop the last value of every non-empty list of logprobs, in place; how many lists lost one.
    The generated ids stay, so each model call reports one logprob fewer than it generated tokens
    (a server that drops the EOS token's logprob; vime PR #70 pads such a gap silently)."""
    shortened = 0
    for values, _ in logprob_lists(document):
        if values:
            values.pop()
            shortened += 1
    return shortened


def malform(body: bytes, style: str) -> bytes:
    """A body that does not parse as JSON: cut in half, or with its structure garbled (the
    ``emptied`` style parses: ``empty_lists``)."""
    if style == "truncate":
        return body[: max(1, len(body) // 2)]
    garbled = body.replace(b":", b";", 1).replace(b"}", b"", 1)
    return garbled if garbled != body else b"{" + body


# The malformed_json styles: those whose body no longer parses (``malform``), and those that
# rewrite the decoded answer in place, each returning how many parts it changed.
UNPARSABLE_STYLES: Final = ("truncate", "garble")
PARSABLE_STYLES: Final[dict[str, Callable[[Any], int]]] = {
    "emptied": empty_lists,
    "no_output": drop_output,
    "no_response": drop_response,
    "no_prompt_ids": drop_last_prompt_ids,
    "short_logprobs": shorten_logprobs,
}


def batch_size(document: Any) -> int:
    """How many items a batched request carries: a top-level list, or the first list value."""
    if isinstance(document, list):
        return len(document)
    if isinstance(document, dict):
        for key in ("message_logs", "items", "batch", "rows", "requests"):
            if isinstance(document.get(key), list):
                return len(document[key])
        for value in document.values():
            if isinstance(value, list):
                return len(value)
    return 1


def _drift_position(prompt: list[int], seen_generations: Sequence[list[int]]) -> int:
    for generation in reversed(seen_generations):
        start = _find(prompt, generation)
        if start is not None:
            return start + len(generation) // 2
    return len(prompt) // 2


def _drift_one(prompt: list[int], position: int, mode: str, replacement_token_id: int | None) -> None:
    position = min(position, len(prompt) - 2)
    if mode == "merge":
        # two tokens become one: the pair is re-tokenized as a single, different id
        merged = replacement_token_id if replacement_token_id is not None else prompt[position] + 1
        prompt[position : position + 2] = [merged]
    else:
        original = prompt[position]
        prompt[position] = (
            replacement_token_id
            if replacement_token_id is not None and replacement_token_id != original
            else (original + 1 if original > 0 else 1)
        )


def _stop_id(seen_generations: Sequence[list[int]]) -> int | None:
    """The id generations end with most often (the model's EOS); the latest wins a tie."""
    counts: dict[int, int] = {}
    for generation in seen_generations:
        if generation:
            counts[generation[-1]] = counts.get(generation[-1], 0) + 1
    if not counts:
        return None
    best = max(counts.values())
    return next(g[-1] for g in reversed(seen_generations) if g and counts[g[-1]] == best)


def _replace_all(prompt: list[int], stop_id: int, replacement_token_id: int | None) -> bool:
    replacement = replacement_token_id if replacement_token_id not in (None, stop_id) else stop_id + 1
    positions = [index for index, token in enumerate(prompt) if token == stop_id]
    for index in positions:
        prompt[index] = replacement
    return bool(positions)


def generations(document: Any) -> list[list[int]]:
    """Every list of generated token ids in a response, in document order."""
    found: list[list[int]] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in GENERATED_IDS_KEYS and isinstance(value, list) and value and _all_ints(value):
                    found.append(list(value))
                elif key == "content" and isinstance(value, list) and _is_chat_logprob_list(value):
                    ids = [_token_id(item.get("token")) for item in value]
                    if all(token is not None for token in ids):
                        found.append([token for token in ids if token is not None])
                else:
                    visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(document)
    return found


def _token_id(token: Any) -> int | None:
    """``"token_id:42"`` -> 42; anything else -> None."""
    if isinstance(token, str) and token.startswith(TOKEN_ID_PREFIX):
        digits = token[len(TOKEN_ID_PREFIX) :]
        return int(digits) if digits.isdigit() else None
    return None


def _find(haystack: list[int], needle: list[int]) -> int | None:
    if not needle or len(needle) > len(haystack):
        return None
    first = needle[0]
    for start in range(len(haystack) - len(needle) + 1):
        if haystack[start] == first and haystack[start : start + len(needle)] == needle:
            return start
    return None


def _all_numbers(values: list[Any]) -> bool:
    return all(isinstance(value, int | float) and not isinstance(value, bool) for value in values)


def _all_ints(values: list[Any]) -> bool:
    return all(isinstance(value, int) and not isinstance(value, bool) for value in values)


def _is_chat_logprob_list(values: list[Any]) -> bool:
    return bool(values) and all(isinstance(item, dict) and "logprob" in item for item in values)
