"""The fault layer's record, hand-built: the ``/run`` answers (fingerprints of what was generated,
logprob digests, the reward) and the model calls the invariants hold a collector's claims against."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_rollout_chaos.collector.protocol import Turn
from pytest_rollout_chaos.history import History, fingerprint, logprob_digest
from pytest_rollout_chaos.servers.faultlayer.asked import asked
from tests.invariants._builders import turns

LINK = "collector->agent:calculator_agent"
CHAT = "POST /v1/chat/completions"
_ids = itertools.count(1)


def run_answered(
    history: History,
    row: int,
    answered: Sequence[Turn] | None = None,
    *,
    reward: float = 1.0,
    status: int | None = 200,
) -> None:
    """What the layer writes for one ``/run``: invoke, then ok with fingerprints, logprob digests and
    the reward (or fail with a status, or info with none when the connection was cut)."""
    facts = {"link": LINK, "server": "calculator_agent", "row": row}
    history.append("agent", "invoke", "POST /run", facts)
    if status is None:
        history.append("agent", "info", "POST /run", {**facts, "error": "cut"})
        return
    if status >= 400:
        history.append("agent", "fail", "POST /run", {**facts, "status": status})
        return
    generated = turns() if answered is None else answered
    data = {
        **facts,
        "status": status,
        "generations": [fingerprint(turn.generation_token_ids) for turn in generated],
        "logprobs": [logprob_digest(turn.generation_log_probs) for turn in generated],
        "reward": reward,
    }
    history.append("agent", "ok", "POST /run", data)


def answered(n: int, *, failed: tuple[int, ...] = ()) -> History:
    """Every row's ``/run`` answered ok with ``builders.turns()``; the rows in ``failed`` with HTTP 500."""
    history = History()
    for row in range(n):
        run_answered(history, row, status=500 if row in failed else 200)
    return history


def run_generated(
    history: History, row: int, generations: Sequence[Sequence[int]], status: int = 200
) -> None:
    """What the layer writes for one ``/run``: the invoke, then ok with fingerprints (or fail)."""
    facts = {"link": LINK, "server": "calculator_agent", "row": row}
    history.append("agent", "invoke", "POST /run", facts)
    if status >= 400:
        history.append("agent", "fail", "POST /run", {**facts, "status": status, "latency_ms": 1.0})
        return
    prints = [fingerprint(ids) for ids in generations]
    history.append("agent", "ok", "POST /run", {**facts, "status": status, "generations": prints})


def model_answered(history: History, row: int | None, generation: Sequence[int]) -> None:
    facts = {"link": "collector->policy", "server": "policy", **({"row": row} if row is not None else {})}
    history.append(
        "policy", "ok", "POST /v1/chat/completions", {**facts, "generations": [fingerprint(generation)]}
    )


def generated(rows: int) -> History:
    """Every row's /run answered with the two turns of ``builders.turns()``."""
    history = History()
    for row in range(rows):
        run_generated(history, row, [turn.generation_token_ids for turn in turns()])
    return history


def sent(
    history: History,
    body: Mapping[str, Any],
    *,
    op: str = "POST /run",
    link: str = LINK,
    status: int | None = 200,
) -> None:
    """What the layer writes for one request: invoke with what it asked for, then its outcome
    (``None``: cut with no answer, as a transport then resends it)."""
    rid = f"req-{next(_ids)}"
    index = body.get("_rowidx", 1)
    facts = {"link": link, "server": link.partition("->")[2], "row": index}
    history.append("agent", "invoke", op, {**facts, **asked(body)}, request_id=rid)
    if status is None:
        history.append("agent", "info", op, {**facts, "error": "cut"}, request_id=rid)
    else:
        history.append(
            "agent", "ok" if status < 400 else "fail", op, {**facts, "status": status}, request_id=rid
        )


def chat(index: int, turn: int, **sampling: Any) -> dict[str, Any]:
    """A native collector's model call for row ``index`` at ``turn`` (its assistant messages)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"What is {index} + 2?"}]
    for done in range(turn):
        messages += [{"role": "assistant", "content": f"call {done}"}, {"role": "tool", "content": "4"}]
    return {"model": "m", "messages": messages, "max_tokens": 64, "_rowidx": index, **sampling}
