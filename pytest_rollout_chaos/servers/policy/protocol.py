"""vLLM's OpenAI-server request fields and error shapes, read and checked without pydantic.

Each reader takes the JSON body and returns plain values or raises ``ApiError`` with vLLM's
status code and an explanation that names the field and what is valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

MAX_LOGPROBS: Final = 20  # vLLM's --max-logprobs default
# Not vLLM's: where the tiny server takes a new seed for the requests that bring none.
RESEED_ROUTE: Final = "/rollout-chaos/reseed"


@dataclass(frozen=True, slots=True)
class ApiError(Exception):
    """An error answered in vLLM's JSON shape."""

    message: str
    status: int = 400
    kind: str = "BadRequestError"

    def response(self) -> web.Response:
        body = {"error": {"message": self.message, "type": self.kind, "param": None, "code": self.status}}
        return web.json_response(body, status=self.status)


def context_overflow(prompt_tokens: int, max_model_len: int) -> ApiError:
    return ApiError(
        f"This model's maximum context length is {max_model_len} tokens. However, your request has "
        f"{prompt_tokens} input tokens. Please reduce the length of the input messages."
    )


def max_tokens_too_large(max_tokens: int, prompt_tokens: int, max_model_len: int) -> ApiError:
    return ApiError(
        f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
        f"context length is {max_model_len} tokens and your request has {prompt_tokens} input tokens "
        f"({max_tokens} > {max_model_len} - {prompt_tokens})."
    )


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as error:
        raise ApiError(f"the request body is not valid JSON: {error}") from error
    if not isinstance(body, dict):
        raise ApiError(f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def optional_int(
    body: dict[str, Any], name: str, *, minimum: int = 0, maximum: int | None = None
) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ApiError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ApiError(f"{name}: {value} is more than the maximum of {maximum}")
    return value


def number(body: dict[str, Any], name: str, default: float, *, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ApiError(f"{name}: expected a number in [{low}, {high}], got {value!r}")
    return float(value)


def flag(body: dict[str, Any], name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(f"{name}: expected true or false, got {value!r}")
    return value


def stop_strings(body: dict[str, Any]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(item for item in value if item)
    raise ApiError(f"stop: expected a string or a list of strings, got {value!r}")


def token_id_list(value: Any, name: str, vocab_size: int) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        raise ApiError(f"{name}: expected a list of token ids (integers)")
    bad = [token for token in value if not 0 <= token < vocab_size]
    if bad:
        raise ApiError(f"{name}: token ids {bad[:5]} are out of range (valid: 0..{vocab_size - 1})")
    return list(value)


def reject_unsupported(body: dict[str, Any]) -> None:
    """Fields the tiny backend cannot honour are errors, never silently ignored."""
    n = body.get("n", 1)
    if n != 1:
        raise ApiError(f"n: only n=1 is supported by the tiny backend, got {n!r}")
    if body.get("stream"):
        raise ApiError("stream: streaming is not supported by the tiny backend (send stream=false)")
    if body.get("echo"):
        raise ApiError("echo: not supported by the tiny backend")
    if body.get("prompt_logprobs"):
        raise ApiError("prompt_logprobs: not supported by the tiny backend")


def chat_tools(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A chat request's ``tools`` as vLLM's request model takes them: each an object whose
    ``function`` holds at least a ``name``. A Responses API tool (flat: ``name`` and ``parameters``
    beside ``type``) is refused with 400 by vLLM's chat endpoint; so it is here."""
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise ApiError(f"tools: expected a list of tools, got {type(tools).__name__}")
    for position, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ApiError(
                f"tools.{position}.function: Field required (a chat tool is "
                '{"type": "function", "function": {"name": ..., "parameters": ...}}; a flat '
                "Responses API tool is not one)"
            )
        if tool.get("type", "function") != "function":
            raise ApiError(f"tools.{position}.type: {tool['type']!r} is not 'function'")
    return tools or None


# vLLM sampling knobs the tiny engine does not implement, with the values that leave sampling as is.
_NEUTRAL_KNOBS: Final[dict[str, tuple[Any, ...]]] = {
    "top_k": (None, -1, 0),
    "min_p": (None, 0, 0.0),
    "repetition_penalty": (None, 1, 1.0),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
}


def reject_sampling_knobs(params: dict[str, Any]) -> None:
    """A sampling knob set to anything but its neutral value is an error: the tiny engine has no
    top-k, min-p or penalties, and pretending it applied them would change what is sampled."""
    for name, neutral in _NEUTRAL_KNOBS.items():
        value = params.get(name)
        if value not in neutral or isinstance(value, bool):
            raise ApiError(
                f"{name}: {value!r} is not supported by the tiny backend "
                f"(valid: {', '.join(repr(v) for v in neutral if v is not None)} or absent)"
            )
