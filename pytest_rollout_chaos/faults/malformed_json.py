"""Semantic fault: a 200 answer whose JSON is truncated or garbled, or parses but is emptied or unreadable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults._layer_fault import LayerFault, effect_param
from pytest_rollout_chaos.servers.faultlayer.effects import MalformedStyle


@dataclass(frozen=True, slots=True)
class MalformedJson(LayerFault):
    """The handler answers, then the body is cut in half or garbled, or (``emptied``) every list in
    it is emptied, so it parses with its envelope and no content, or it parses with one part a
    reader cannot use (``no_output``, ``no_response``, ``no_prompt_ids``, ``short_logprobs``); the
    status stays 200. ``cut_off`` sends the status, a head promising the whole body and half of it,
    then closes the connection: the client gets no answer it can read."""

    kind: ClassVar[str] = "malformed_json"
    effect: ClassVar[str] = "malformed_json"

    style: MalformedStyle = effect_param("malformed_json", "style")  # noqa: RUF009 - a dataclasses.field
