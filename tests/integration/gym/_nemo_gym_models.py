"""Pydantic models of NeMo Gym 0.4.0's wire shapes, written from the project's research notes.

NeMo Gym itself cannot be installed on Python 3.11, so these restate what its models require:
``/run`` answers ``BaseVerifyResponse`` (request fields + ``response`` + ``reward: float``, extra
keys allowed); ``response`` is a Responses-API object whose output items are ``message``,
``function_call``, ``function_call_output`` and ``reasoning``, and the items produced by the
model in training mode carry ``prompt_token_ids`` / ``generation_token_ids`` (ints) and
``generation_log_probs`` (floats); the head server's config names every instance as
``{name: {server_type: {implementation: {host, port, entrypoint, ...}}}}``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TokenFields(BaseModel):
    prompt_token_ids: list[int]
    generation_token_ids: list[int]
    generation_log_probs: list[float]


class OutputText(_Strict):
    type: Literal["output_text"]
    text: str
    annotations: list[Any]


class OutputMessage(_Strict):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    status: Literal["in_progress", "completed", "incomplete"]
    content: list[OutputText]


class FunctionCall(_Strict):
    id: str | None = None
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    status: Literal["in_progress", "completed", "incomplete"] | None = None

    @field_validator("arguments")
    @classmethod
    def arguments_are_json(cls, value: str) -> str:
        json.loads(value)
        return value


class FunctionCallOutput(_Strict):
    id: str | None = None
    type: Literal["function_call_output"]
    call_id: str
    output: str
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class SummaryText(_Strict):
    type: Literal["summary_text"]
    text: str


class Reasoning(_Strict):
    id: str
    type: Literal["reasoning"]
    summary: list[SummaryText]
    status: str | None = None


class TrainOutputMessage(OutputMessage, TokenFields):
    pass


class TrainFunctionCall(FunctionCall, TokenFields):
    pass


class TrainReasoning(Reasoning, TokenFields):
    pass


OutputItem = Annotated[
    TrainOutputMessage
    | TrainFunctionCall
    | TrainReasoning
    | OutputMessage
    | FunctionCall
    | FunctionCallOutput
    | Reasoning,
    Field(union_mode="left_to_right"),
]


class IncompleteDetails(_Strict):
    reason: Literal["max_output_tokens", "content_filter"]


class Usage(BaseModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class GymResponse(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["response"]
    created_at: float
    model: str
    output: list[OutputItem]
    parallel_tool_calls: bool
    tool_choice: Any
    tools: list[dict[str, Any]]
    incomplete_details: IncompleteDetails | None = None
    usage: Usage | None = None


class ResponseCreateParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    input: str | list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None


class BaseVerifyResponse(BaseModel):
    model_config = ConfigDict(extra="allow")
    responses_create_params: ResponseCreateParams
    response: GymResponse
    reward: float
    failure_reason: str | None = None


class ServerRef(_Strict):
    type: Literal["resources_servers", "responses_api_models", "responses_api_agents"]
    name: str


class InstanceSettings(BaseModel):
    model_config = ConfigDict(extra="allow")
    entrypoint: str
    host: str
    port: int
    resources_server: ServerRef | None = None
    model_server: ServerRef | None = None


class HeadServerConfig(_Strict):
    host: str
    port: int


class ServerInstanceDisplayConfig(_Strict):
    config_path: str | None = None
    dir_path: str | None = None
    entrypoint: str | None = None
    host: str | None = None
    name: str | None = None
    pid: int | None = None
    port: int | None = None
    process_name: str | None = None
    server_type: str | None = None
    start_time: float | None = None
    status: Literal["success", "connection_error", "timeout", "unknown_error"] | None = None
    uptime_seconds: float | None = None
    url: str | None = None


SERVER_TYPES = ("resources_servers", "responses_api_models", "responses_api_agents")


def instances_of(config: dict[str, Any]) -> dict[str, tuple[str, InstanceSettings]]:
    """Every server instance in a global config: name -> (server type, settings), validated."""
    found: dict[str, tuple[str, InstanceSettings]] = {}
    HeadServerConfig.model_validate(config["head_server"])
    for name, entry in config.items():
        if not isinstance(entry, dict) or not any(key in SERVER_TYPES for key in entry):
            continue
        ((server_type, implementations),) = entry.items()
        ((_implementation, settings),) = implementations.items()
        found[name] = (server_type, InstanceSettings.model_validate(settings))
    return found
