"""Running a collector once under a deadline and capturing what an invariant may see.

``observe`` never lets the collector decide the test's fate by raising: whatever it raises
(a CancelledError of its own included) becomes ``Observation.raised``; running past the deadline
cancels it and sets ``timed_out``. Only a cancellation of the caller itself propagates.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from pytest_rollout_chaos.collector.protocol import Collector, Mode, Rollout, Row
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Observation


async def observe(
    collector: Collector,
    rows: Sequence[Row],
    *,
    mode: Mode,
    history: History,
    deadline_s: float,
    max_aborted_fraction: float = 0.5,
    request_timeout_s: float | None = None,
    max_attempts: int | None = None,
    collect_timeout_s: float | None = None,
) -> Observation:
    """Run ``collector.collect(rows)`` with ``deadline_s`` and return the Observation (the limits
    the collector was given, for the invariants that judge against them)."""
    rollouts: Sequence[Rollout | None] | None = None
    raised: BaseException | None = None
    timed_out = False
    started = time.monotonic()
    history.append("harness", "invoke", "observe", {"rows": len(rows), "deadline_s": deadline_s})
    deadline = asyncio.timeout(deadline_s)
    try:
        async with deadline:
            rollouts = await collector.collect(rows, mode=mode)
    except TimeoutError as error:
        if deadline.expired():
            timed_out = True
        else:
            raised = error
    except asyncio.CancelledError as error:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        raised = error
    except Exception as error:
        raised = error
    elapsed_s = time.monotonic() - started
    history.append("harness", "info", "observe", {"elapsed_s": round(elapsed_s, 3), "timed_out": timed_out})
    return Observation(
        rows=list(rows),
        rollouts=None if rollouts is None else list(rollouts),
        raised=raised,
        history=history,
        deadline_s=deadline_s,
        elapsed_s=elapsed_s,
        mode=mode,
        max_aborted_fraction=max_aborted_fraction,
        timed_out=timed_out,
        started_at=started,
        request_timeout_s=request_timeout_s,
        max_attempts=max_attempts,
        collect_timeout_s=collect_timeout_s,
    )
