"""The collections after the first (``workload.collections``): a trainer's next steps.

A trainer keeps its collector from one step to the next, so the engine, once the first
collection has ended and every fault is healed, calls ``collect`` again on the same collector
object, each time with a fresh deep copy of the rows as they were first handed over (a next
batch, numbered the same way) and within the scenario's deadline (``expect.within_s``); one
that does not end by then is cancelled and counted as cut. Each is recorded in the History as
the engine's (``invoke collection``, then ``ok`` with what came back, ``fail`` with what it
raised, or ``info`` when it was cut), so the timeline shows it; ``next_steps_sound`` judges
them, and nothing else does.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from pytest_rollout_chaos.collector import contract
from pytest_rollout_chaos.collector.protocol import Collector, Rollout
from pytest_rollout_chaos.history import EventKind, History
from pytest_rollout_chaos.invariants.base import FollowUp
from pytest_rollout_chaos.scenario.model import Scenario

SOURCE: Final = "engine"
OP: Final = "collection"


async def run_next_steps(
    collector: Collector,
    scenario: Scenario,
    rows: Sequence[dict[str, Any]],
    history: History,
    *,
    who: str,
    cancel_grace_s: float,
) -> list[FollowUp]:
    """Collections 2..``workload.collections`` on ``collector``, one after another, each with a
    deep copy of ``rows``; a collector that breaks its contract raises ``CollectorContractError``
    naming ``who``."""
    total = scenario.workload.collections
    return [
        await _one(
            collector,
            scenario,
            copy.deepcopy(list(rows)),
            history,
            number=number,
            who=who,
            cancel_grace_s=cancel_grace_s,
        )
        for number in range(2, total + 1)
    ]


async def _one(
    collector: Collector,
    scenario: Scenario,
    rows: list[dict[str, Any]],
    history: History,
    *,
    number: int,
    who: str,
    cancel_grace_s: float,
) -> FollowUp:
    deadline_s = scenario.expect.within_s
    total = scenario.workload.collections
    history.append(SOURCE, "invoke", OP, {"collection": number, "of": total, "rows": len(rows)})
    started = time.monotonic()
    rollouts: list[Rollout | None] | None = None
    raised: BaseException | None = None
    collect = asyncio.create_task(collector.collect(rows, mode=scenario.workload.mode))
    done, _ = await asyncio.wait({collect}, timeout=deadline_s)
    if done:
        try:
            returned = collect.result()
        except (Exception, asyncio.CancelledError) as error:
            raised = error
        else:
            rollouts = contract.check_rollouts(returned, rows, who=who)
    else:
        collect.cancel()
        await asyncio.wait({collect}, timeout=cancel_grace_s)
    follow_up = FollowUp(
        number=number,
        rows=rows,
        rollouts=rollouts,
        raised=raised,
        timed_out=not done,
        started_at=started,
        elapsed_s=time.monotonic() - started,
        deadline_s=deadline_s,
    )
    kind: EventKind = "info" if follow_up.timed_out else "fail" if raised is not None else "ok"
    outcome = {
        "collection": number,
        "outcome": outcome_text(follow_up),
        "elapsed_s": round(follow_up.elapsed_s, 3),
    }
    history.append(SOURCE, kind, OP, outcome)
    return follow_up


def outcome_text(follow_up: FollowUp) -> str:
    """One line: what the follow-up did."""
    if follow_up.timed_out:
        return f"did not finish within {follow_up.deadline_s:g}s and was cancelled"
    if follow_up.raised is not None:
        return f"raised {type(follow_up.raised).__name__}: {follow_up.raised}"
    rollouts = follow_up.rollouts or []
    counts = Counter("None" if rollout is None else rollout.status for rollout in rollouts)
    detail = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    return f"returned {len(rollouts)} rollouts for {len(follow_up.rows)} rows ({detail or 'none'})"
