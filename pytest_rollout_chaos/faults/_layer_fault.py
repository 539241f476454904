"""The shared shape of semantic faults: a fault-layer rule on the target server, disarmed on heal.

The rule is armed in the HTTP fault layer, in the network path in front of the target, so it
acts on any server: ours, real vLLM, real NeMo Gym, or one a user started. Every semantic fault
matches requests the same way (route, row, nth, every, probability, count: see
``servers.faultlayer.rules``), so those parameters live here once. The rule carries the fault's
tag, so healing disarms by tag: idempotent, and no state kept between the two calls. What it
touched is what its rule hit: the layer records each hit as a ``hook`` event naming the rule.

The layer declares its effects and their parameters (``servers.faultlayer.effects``, a layer
below); a fault names its ``effect`` and declares each of the effect's parameters as a field with
``effect_param``, which reads its default, bounds and help from there (choices come with the
``Literal`` alias declared there), and ``inject`` arms the effect with exactly those fields.
``tests/faults/test_layer_effects.py`` checks that the two sides list the same parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

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
from pytest_rollout_chaos.servers.faultlayer.effects import EFFECTS, MATCH, EffectParam

_FROM_EFFECT: Final[Any] = object()


def _field(spec: EffectParam, default: object, minimum: float | None) -> Any:
    return field(
        default=spec.default if default is _FROM_EFFECT else default,
        metadata=param(spec.help, minimum=spec.minimum if minimum is None else minimum, maximum=spec.maximum),
    )


def effect_param(
    effect: str, name: str, *, default: object = _FROM_EFFECT, minimum: float | None = None
) -> Any:
    """A fault field for parameter ``name`` of the layer's ``effect``: its default, bounds and help.

    ``default`` and ``minimum`` are for a fault that differs from the layer: a ``slow_env``
    delays 200 ms unless told otherwise, and a scenario may not name a negative token index
    (which the layer takes as counting from the end).
    """
    return _field(EFFECTS[effect].parameter(name), default, minimum)


def _match_param(name: str) -> Any:
    [spec] = [spec for spec in MATCH if spec.name == name]
    return _field(spec, _FROM_EFFECT, None)


@dataclass(frozen=True, slots=True)
class LayerFault:
    """Base of the fault-layer faults: the target server and which of its requests to hit."""

    kind: ClassVar[str] = ""
    family: ClassVar[Family] = "semantic"
    targets: ClassVar[Targets] = "servers"
    needs: ClassVar[tuple[Need, ...]] = (Need.FAULT_LAYER,)
    default_route: ClassVar[str | None] = None
    effect: ClassVar[str] = ""  # the layer effect its rule arms (``servers.faultlayer.effects``)

    target: str
    route: str | None = _match_param("route")
    row: int | None = _match_param("row")
    nth: int | None = _match_param("nth")
    every: int | None = _match_param("every")
    probability: float | None = _match_param("probability")
    count: int | None = _match_param("count")

    def match(self) -> dict[str, Any]:
        chosen = {spec.name: getattr(self, spec.name) for spec in MATCH}
        if chosen["route"] is None:
            chosen["route"] = self.default_route
        return {key: value for key, value in chosen.items() if value is not None}

    def effect_params(self) -> dict[str, Any]:
        """The effect's parameters as this fault sends them: its fields of the same names."""
        return {spec.name: getattr(self, spec.name) for spec in EFFECTS[self.effect].params}

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        return await self.arm(ctx, self.effect, **self.effect_params())

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
