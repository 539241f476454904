"""The shared shape of semantic faults: a fault-layer rule on the target server, disarmed on heal.

The rule is armed in the HTTP fault layer, in the network path in front of the target, so it
acts on any server: ours, real vLLM, real NeMo Gym, or one a user started. Every semantic fault
matches requests the same way (route, row, nth, every, probability, count: see
``servers.faultlayer.rules``), so those parameters live here once. The rule carries the fault's
tag, so healing disarms by tag: idempotent, and no state kept between the two calls. What it
touched is what its rule hit: the layer records each hit as a ``hook`` event naming the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_rollout_chaos.faults.base import (
    Exposure,
    Family,
    FaultContext,
    Need,
    Targets,
    Touched,
    fault_tag,
    param,
)
from pytest_rollout_chaos.faults.touch import rule_hits
from pytest_rollout_chaos.servers.faultlayer.client import LayerControl


@dataclass(frozen=True, slots=True)
class LayerFault:
    """Base of the fault-layer faults: the target server and which of its requests to hit."""

    kind: ClassVar[str] = ""
    family: ClassVar[Family] = "semantic"
    targets: ClassVar[Targets] = "servers"
    needs: ClassVar[tuple[Need, ...]] = (Need.FAULT_LAYER,)
    default_route: ClassVar[str | None] = None

    target: str
    route: str | None = field(
        default=None,
        metadata=param("request path to hit (exact; a prefix when it ends with / or *); default per kind"),
    )
    row: int | None = field(default=None, metadata=param("only requests of this _rowidx", minimum=0))
    nth: int | None = field(
        default=None, metadata=param("only the nth matching request (the first of every)", minimum=1)
    )
    every: int | None = field(default=None, metadata=param("then every k-th matching request", minimum=1))
    probability: float | None = field(
        default=None, metadata=param("seeded chance per matching request", minimum=0.0, maximum=1.0)
    )
    count: int | None = field(default=None, metadata=param("at most this many hits", minimum=1))

    def match(self) -> dict[str, Any]:
        route = self.route if self.route is not None else self.default_route
        chosen = {
            "route": route,
            "row": self.row,
            "nth": self.nth,
            "every": self.every,
            "probability": self.probability,
            "count": self.count,
        }
        return {key: value for key, value in chosen.items() if value is not None}

    async def arm(self, ctx: FaultContext, effect: str, **params: Any) -> Mapping[str, object]:
        """Arm ``effect`` on the target; return the facts to record (rule id, match, URL)."""
        seed = ctx.rng.randrange(2**31)
        async with LayerControl(ctx.layer_url()) as control:
            rule_id = await control.arm(
                self.target, effect, match=self.match(), tag=fault_tag(self), seed=seed, **params
            )
        return {"rule": rule_id, "match": self.match()}

    async def heal(self, ctx: FaultContext) -> None:
        async with LayerControl(ctx.layer_url()) as control:
            await control.clear(tag=fault_tag(self))

    def preflight(self, ctx: FaultContext) -> None:
        ctx.layer_url()

    def touched(self, exposure: Exposure) -> Touched:
        return Touched(rule_hits(exposure.events, exposure.facts.get("rule")), "requests hit by its rule")
