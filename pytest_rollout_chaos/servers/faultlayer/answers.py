"""What an answer says of the model calls behind it, read for the History; what a chat request asks.

The layer records, with every answer that leaves a link, what it generated, and with every chat
request what it asks (``proxy``); these are the readers, pure functions over a decoded body, each
one pass over the output items or choices. ``answer_calls`` reads what one answer generated and
the logprobs it reported, per model call, ``answer_finishes`` why each call of a policy's answer
stopped, ``answer_texts`` a chat answer's texts, ``answer_reward`` a ``/run`` result's reward,
``answer_prompts`` the prompt ids each of its model calls was sent, and ``answer_drift`` which of
those drifted from the previous call's; ``last_message`` what a chat request asks the policy to
answer now. Generated ids come as ints or as chat logprob tokens spelled ``token_id:N`` (vLLM's
``return_tokens_as_token_ids``).
"""

from __future__ import annotations

import itertools
from typing import Any, Final

TOKEN_ID_PREFIX: Final = "token_id:"


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
    """The logprobs of a chat logprob list (a non-empty list of objects that each hold a
    ``logprob``), read in the one pass that checks it; None for anything else."""
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
