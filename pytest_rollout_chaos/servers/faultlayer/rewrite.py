"""Response-body rewrites for the semantic fault effects: bad or drifted logprobs, prefix drift, broken JSON.

Pure functions over decoded JSON (or bytes), so they are easy to reason about and test. The
walkers look for the field names that vLLM, NeMo Gym and the servers of this stack use, wherever
they are nested: chat ``choices[].logprobs.content[].logprob``, completions
``choices[].logprobs.token_logprobs``, Gym output items' ``generation_log_probs`` (also inside
``/run`` results); for prefix drift, prompt ids in ``prompt_token_ids`` or a ``/tokenize``
answer's ``tokens``, and generated ids in ``token_ids``, ``generation_token_ids`` or chat
logprob tokens spelled ``token_id:N`` (vLLM's ``return_tokens_as_token_ids``).
``answer_calls`` reads what one answer generated and the logprobs it reported, per model call,
``answer_finishes`` why each call of a policy's answer stopped, ``answer_reward`` a ``/run``
result's reward, ``answer_prompts`` the prompt ids each of its model calls was sent, and
``answer_drift`` which of those drifted from the previous call's, for the History.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

LOGPROB_LIST_KEYS: Final = ("token_logprobs", "generation_log_probs")
GENERATED_IDS_KEYS: Final = ("token_ids", "generation_token_ids")
PROMPT_IDS_KEYS: Final = ("prompt_token_ids", "tokens")
TOKEN_ID_PREFIX: Final = "token_id:"

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


def answer_generations(document: Any) -> list[list[int]]:
    """What one answer generated, one id list per model call, in order; [] when it holds none."""
    return [ids for ids, _ in answer_calls(document)]


def answer_calls(document: Any) -> list[tuple[list[int], list[Any]]]:
    """Each model call of one answer: the ids it generated and the logprobs it reported, in order.

    Gym output items (a ``/v1/responses`` answer, or a ``/run`` result's ``response.output``:
    only the last item of each model call carries ``generation_token_ids`` and
    ``generation_log_probs``), else each chat or completions choice (``token_ids``, else its
    logprob tokens spelled ``token_id:N``; logprobs from ``logprobs.content[].logprob`` or
    ``logprobs.token_logprobs``). Only these fields are read: one pass over the output items or
    choices of an already decoded body. A call with no logprobs reports an empty list.
    """
    return answer_generated(document)[0]


def answer_finishes(document: Any) -> list[str | None]:
    """Why each model call of a chat, completions or token-in, token-out answer stopped (its
    choice's ``finish_reason``: ``stop``, ``length``, ...), one per call ``answer_calls`` reads,
    in order; [] for an answer with no choices (a Responses or ``/run`` answer)."""
    return answer_generated(document)[1]


def answer_generated(document: Any) -> tuple[list[tuple[list[int], list[Any]]], list[str | None]]:
    """``answer_calls`` and ``answer_finishes`` of one answer, read in one pass (the layer records
    both of every answer; a 2048-token answer's ids are worth reading once)."""
    if not isinstance(document, dict):
        return [], []
    response = document.get("response")
    output = response.get("output") if isinstance(response, dict) else document.get("output")
    if isinstance(output, list):
        calls = []
        for item in output:
            ids = _ids(item.get("generation_token_ids")) if isinstance(item, dict) else None
            if ids:
                logprobs = item.get("generation_log_probs")
                calls.append((ids, list(logprobs) if isinstance(logprobs, list) else []))
        return calls, []
    found = _choice_calls(document)
    return [(ids, values) for ids, values, _ in found], [finish for _, _, finish in found]


def _choice_calls(document: dict[str, Any]) -> list[tuple[list[int], list[Any], str | None]]:
    """Each choice that generated ids: the ids, the logprobs it reported and its finish reason."""
    found: list[tuple[list[int], list[Any], str | None]] = []
    choices = document.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        ids = _ids(choice.get("token_ids"))
        logprobs = choice.get("logprobs")
        values: list[Any] = []
        if isinstance(logprobs, dict):
            chat = _chat_logprobs(logprobs.get("content"))
            if chat is not None:
                values = chat
                if ids is None:
                    ids = _ids([item.get("token") for item in logprobs["content"]])
            else:
                given = logprobs.get("token_logprobs")
                values = list(given) if isinstance(given, list) else []
                if ids is None:
                    ids = _ids(logprobs.get("tokens"))
        if ids:
            finish = choice.get("finish_reason")
            found.append((ids, values, str(finish) if isinstance(finish, str) else None))
    return found


def answer_texts(document: Any) -> list[object]:
    """The message content of each choice of a chat answer, in order ([] for any other answer):
    the text a collector that drives the policy itself hands the environment next."""
    choices = document.get("choices") if isinstance(document, dict) else None
    texts: list[object] = []
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict):
            texts.append(message.get("content"))
    return texts


def last_message(document: Any) -> tuple[bool, object]:
    """Whether a request is a chat request (a ``messages`` list), and its last message's content:
    what the policy is asked to answer now (a user prompt, or the environment's observation)."""
    messages = document.get("messages") if isinstance(document, dict) else None
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return False, None
    return True, messages[-1].get("content")


def answer_prompts(document: Any) -> list[list[int]]:
    """The prompt ids each model call of a Gym answer (a ``/run`` result) was sent, one list per
    call ``answer_calls`` reads, in order: the ``prompt_token_ids`` of the item that carries its
    generation (the ids the model server took from ``/tokenize`` or spliced, as the policy got
    them). [] when any call's item carries none: the answer does not say what was sent."""
    if not isinstance(document, dict):
        return []
    response = document.get("response")
    output = response.get("output") if isinstance(response, dict) else document.get("output")
    prompts = []
    for item in output if isinstance(output, list) else []:
        if isinstance(item, dict) and _ids(item.get("generation_token_ids")):
            prompt = _ids(item.get("prompt_token_ids"))
            if prompt is None:
                return []
            prompts.append(prompt)
    return prompts


def answer_drift(document: Any) -> list[int]:
    """The model calls of a Gym answer (a ``/run`` result) whose prompt ids do not start with the
    previous call's prompt + generation ids: where the row's prompt drifted. Calls whose items
    carry no ``prompt_token_ids`` are not compared."""
    if not isinstance(document, dict):
        return []
    response = document.get("response")
    output = response.get("output") if isinstance(response, dict) else document.get("output")
    items = output if isinstance(output, list) else []
    calls = [
        (_ids(item.get("prompt_token_ids")), ids)
        for item in items
        if isinstance(item, dict) and (ids := _ids(item.get("generation_token_ids")))
    ]
    drifted = []
    for index in range(1, len(calls)):
        (before, generated), (prompt, _) = calls[index - 1], calls[index]
        if before is None or prompt is None:
            continue
        expected = before + generated
        if prompt[: len(expected)] != expected:
            drifted.append(index)
    return drifted


def answer_reward(document: Any) -> float | None:
    """The reward of a ``/run`` result (the row plus ``reward`` and ``response``, or a result that
    lost its ``response`` and kept the reward beside it); None otherwise."""
    if not isinstance(document, dict) or not isinstance(document.get("response", {}), dict):
        return None
    reward = document.get("reward")
    return float(reward) if isinstance(reward, int | float) and not isinstance(reward, bool) else None


def _chat_logprobs(content: Any) -> list[Any] | None:
    """The logprobs of a chat logprob list (``_is_chat_logprob_list``), read in the one pass that
    checks it; None for anything else."""
    if not isinstance(content, list) or not content:
        return None
    try:
        return [item["logprob"] for item in content]
    except (TypeError, KeyError):  # an item that is not an object, or one with no logprob
        return None


def _ids(values: Any) -> list[int] | None:
    """Ints, digit strings or ``token_id:N`` strings as ints; None if any is something else."""
    if not isinstance(values, list):
        return None
    kinds = set(map(type, values))
    if kinds == {int}:  # token ids as vLLM and NeMo Gym send them: taken as they are
        return list(values)
    if kinds == {str}:  # chat logprob tokens (``token_id:N``), a few thousand in a long answer
        digits = list(map(str.removeprefix, values, itertools.repeat(TOKEN_ID_PREFIX)))
        if not "".join(digits).isdigit():  # no sign, space or underscore, which int() would take
            return None
        try:
            return list(map(int, digits))
        except ValueError:  # an empty one, or a digit int() does not read (a superscript)
            return None
    out: list[int] = []
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            out.append(value)
        elif isinstance(value, str) and value.removeprefix(TOKEN_ID_PREFIX).isdigit():
            out.append(int(value.removeprefix(TOKEN_ID_PREFIX)))
        else:
            return None
    return out


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
