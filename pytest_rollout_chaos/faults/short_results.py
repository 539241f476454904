"""Semantic fault: the Gym client yields fewer results than rows (NeMo RL #2305, "empty epochs").

Acts on ``ctx.gym_client``, which offers ``short_results(count)``: from then on it drops
``count`` results; ``short_results(0)`` (the heal) restores full results.

It stays on the client side, unlike the other semantic faults (which the fault layer applies in
the network path): a short count is the transport handing the trainer fewer results than it
asked for while every ``/run`` it sent was answered, as when NeMo RL's caller awaited fewer
futures than rows. Nothing on the wire can produce that; a ``/run`` lost on the wire is a
different fault (``reset_peer``, ``hang``, ``trajectory_exception``). What it touched is the Gym
calls it shortened: the client records each as a ``collector``/``short_results`` event.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults.base import Exposure, Family, FaultContext, Need, Targets, Touched, param


@dataclass(frozen=True, slots=True)
class ShortResults:
    """Make the Gym client silently return ``count`` fewer results."""

    kind: ClassVar[str] = "short_results"
    family: ClassVar[Family] = "semantic"
    targets: ClassVar[Targets] = ("gym_client",)
    needs: ClassVar[tuple[Need, ...]] = (Need.GYM_CLIENT,)

    target: str
    count: int = field(default=1, metadata=param("how many results go missing", minimum=1))

    def preflight(self, ctx: FaultContext) -> None:
        if not callable(getattr(ctx.gym_client, "short_results", None)):
            raise FaultError(
                f"short_results on {self.target!r}: this run's Gym client "
                f"({type(ctx.gym_client).__name__}) has no short_results(count)"
            )

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        self.preflight(ctx)
        await _call(ctx, self.count)
        return {"dropped": self.count}

    async def heal(self, ctx: FaultContext) -> None:
        if callable(getattr(ctx.gym_client, "short_results", None)):
            await _call(ctx, 0)

    def touched(self, exposure: Exposure) -> Touched:
        shortened = sum(
            1
            for event in exposure.events
            if event.source == "collector" and event.op == "short_results" and event.t >= exposure.injected_at
        )
        return Touched(shortened, "Gym calls shortened")


async def _call(ctx: FaultContext, count: int) -> None:
    result = getattr(ctx.gym_client, "short_results")(count)  # noqa: B009 - any client object
    if inspect.isawaitable(result):
        await result
