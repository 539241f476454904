"""What the rules a request hits do to it, each hit recorded: hold it, answer for the server, rewrite.

A rule's effect acts in its phase (``effects``), which ``proxy`` keeps in order on every request:
``hold`` delays or hangs the request before it is forwarded, ``answer_instead`` gives the status
and body a rule answers with in the server's place, and ``rewrite_answer`` changes the server's
answer (an ``OutgoingAnswer``, with ``rewrite``'s functions) before it leaves. A ``Hit`` writes
each rule that fired as the state's ``hook`` record, under the link's server.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Final

from multidict import CIMultiDict

from pytest_rollout_chaos.servers.faultlayer import rewrite
from pytest_rollout_chaos.servers.faultlayer.rules import Rule
from pytest_rollout_chaos.servers.faultlayer.state import Decisions, Link, record_hit

VLLM_500_TEXT: Final = "Internal Server Error"

_JSON: Final = "application/json; charset=utf-8"


@dataclass(slots=True)
class OutgoingAnswer:
    """The upstream's answer as it will leave: status, headers, body, and the body decoded."""

    status: int
    headers: CIMultiDict[str]
    raw: bytes
    document: Any
    cut_at: int | None = None  # malformed_json cut_off: the bytes sent before the connection closes


@dataclass(frozen=True, slots=True)
class Hit:
    """Where a rule fired: the link, the request's path and its row (for recording the hit)."""

    state: Decisions
    link: Link
    path: str
    row: int | None

    def record(self, rule: Rule, **extra: Any) -> None:
        record_hit(self.state.writer(self.link.source), self.link, rule, self.row, self.path, **extra)


async def hold(hit: Hit, rule: Rule, document: Any) -> None:
    """Hold the request before it is forwarded: a ``delay`` for its time (and more per item of a
    batch), a ``hang`` until its rule is disarmed or its ``max_hang_s`` has passed."""
    if rule.effect == "delay":
        items = rewrite.batch_size(document)
        delay_s = (rule.params["delay_ms"] + rule.params["per_item_ms"] * items) / 1000
        hit.record(rule, delay_s=round(delay_s, 4), items=items)
        await asyncio.sleep(delay_s)
        return
    hit.record(rule)
    await hit.state.hold(rule.id, rule.params["max_hang_s"])


def answer_instead(hit: Hit, rule: Rule) -> tuple[int, str, bytes]:
    """The status, content type and body a rule answers with in the server's place."""
    hit.record(rule)
    if rule.effect == "trajectory_exception":
        error = RuntimeError(rule.params["message"])
        # NeMo Gym's exception middleware answers 500 with the repr as a JSON string
        return 500, _JSON, json.dumps(repr(error)).encode()
    status, body = rule.params["status"], rule.params["body"]
    if body is None:
        body = {"error": {"message": "injected HTTP error", "type": "chaos", "code": status}}
    if isinstance(body, str):
        return status, "text/plain; charset=utf-8", body.encode()
    return status, _JSON, json.dumps(body).encode()


def rewrite_answer(hit: Hit, rule: Rule, answer: OutgoingAnswer, memory: list[list[int]]) -> None:
    """Apply one rewriting rule to the answer, in place (``memory``: a ``prefix_drift`` rule's)."""
    if rule.effect == "nan_logprobs" and rule.params["shape"] == "http_500":
        hit.record(rule, shape="http_500")
        # vLLM fails to encode a NaN logprob and Starlette answers a plain-text 500
        answer.status, answer.raw, answer.document = 500, VLLM_500_TEXT.encode(), None
        return
    if answer.headers.get("Content-Encoding", "identity") != "identity":
        hit.record(rule, skipped="encoded response body", changed=0)
        return
    if rule.effect == "malformed_json" and rule.params["style"] == "cut_off":
        hit.record(rule, style="cut_off")
        answer.cut_at = max(1, len(answer.raw) // 2)
        return
    if rule.effect == "malformed_json" and rule.params["style"] in rewrite.UNPARSABLE_STYLES:
        hit.record(rule, style=rule.params["style"])
        answer.raw, answer.document = rewrite.malform(answer.raw, rule.params["style"]), None
        return
    if answer.document is None:
        hit.record(rule, skipped="response is not JSON", changed=0)
        return
    if rule.effect == "malformed_json":
        style = rule.params["style"]
        hit.record(rule, style=style, changed=rewrite.PARSABLE_STYLES[style](answer.document))
    elif rule.effect == "nan_logprobs":
        changed = rewrite.rewrite_logprobs(answer.document, rule.params["shape"], rule.params["token_index"])
        hit.record(rule, shape=rule.params["shape"], changed=changed)
    elif rule.effect == "logprob_drift":
        changed = rewrite.shift_logprobs(answer.document, rule.params["drift_nats"])
        hit.record(rule, drift_nats=rule.params["drift_nats"], changed=changed)
    else:
        changed = rewrite.drift_prompt_ids(
            answer.document, memory, rule.params["mode"], rule.params["replacement_token_id"]
        )
        hit.record(rule, mode=rule.params["mode"], changed=changed)
    answer.raw = rewrite.dumps(answer.document)
