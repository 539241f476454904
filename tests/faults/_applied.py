"""``async with applied(fault, ctx):`` a fault held for the block, healed on every path.

The tests' way to run one fault around a block of checks. The plugin itself runs faults through
the scheduler (``engine.schedule``) and ``chaos_faults`` (``injector``), over the same two
recorded halves (``faults.apply.inject_recorded`` and ``heal_recorded``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping

from pytest_rollout_chaos.faults.apply import describe, heal_recorded, inject_recorded
from pytest_rollout_chaos.faults.base import Fault, FaultContext

_logger = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def applied(fault: Fault, ctx: FaultContext) -> AsyncIterator[Mapping[str, object]]:
    """Inject ``fault``, yield what it reported, heal it.

    Heal runs on every path, also when inject failed half-way. A heal error never hides the
    error that ended the block; it is logged and recorded, and raised only on a clean exit.
    """
    failed = False
    try:
        yield await inject_recorded(fault, ctx)
    except BaseException:
        failed = True
        raise
    finally:
        try:
            await heal_recorded(fault, ctx)
        except Exception:
            if not failed:
                raise
            _logger.exception("healing %s failed after an earlier error", describe(fault))
