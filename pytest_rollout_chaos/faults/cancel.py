"""The collection is cancelled from outside, as a trainer's step timeout or shutdown cancels it.

Not a server fault: it acts on the caller's side, on the running ``collect`` (``FaultContext
.collection``, attached by whoever runs it), so its target is always ``collector``. A collector
must let the ``CancelledError`` through promptly and send nothing afterwards; one that catches
``BaseException`` per row and carries on keeps the agents busy for a step nobody waits for
(``cancel_honoured`` judges it). There is nothing to heal, and it touched the collection when
it cancelled one (none when the collection had already ended).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.base import Exposure, Family, FaultContext, Need, Targets, Touched


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel the collection under way (its task), once."""

    kind: ClassVar[str] = "cancel"
    family: ClassVar[Family] = "semantic"
    targets: ClassVar[Targets] = ("collector",)
    needs: ClassVar[tuple[Need, ...]] = (Need.COLLECTION,)

    target: str

    def preflight(self, ctx: FaultContext) -> None:
        if not ctx.collection.attached:
            raise FaultError(
                f"cancel on {self.target!r}: no collection is attached to this run's fault context "
                "(the scenario runner attaches one; in Python, call ctx.collection.attach(task))"
            )

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        return {"cancelled": ctx.collection.cancel()}

    async def heal(self, ctx: FaultContext) -> None:
        return None

    def touched(self, exposure: Exposure) -> Touched:
        return Touched(1 if exposure.facts.get("cancelled") else 0, "collections cancelled")
