"""Network fault: take a link down (Toxiproxy ``enabled: false``).

New connections are refused and open ones are closed; heal enables the proxy again. It refuses
new connections before the fault layer, where no recorder sees them, so what it touched is the
requests it cut and, as seen from the link's client, the requests the client failed meanwhile
(an agent's ``/run`` while its resources link is down).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from pytest_rollout_chaos.faults.base import Exposure, Family, FaultContext, Need, Targets, Touched
from pytest_rollout_chaos.faults.touch import client_failures, requests_on_link


@dataclass(frozen=True, slots=True)
class Down:
    """The link is cut: connection refused, and every open connection closed."""

    kind: ClassVar[str] = "down"
    family: ClassVar[Family] = "network"
    targets: ClassVar[Targets] = "links"
    needs: ClassVar[tuple[Need, ...]] = (Need.LINK,)

    target: str

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        client, proxy = ctx.proxy(self.target)
        await client.set_enabled(proxy, False)
        return {"proxy": proxy}

    async def heal(self, ctx: FaultContext) -> None:
        client, proxy = ctx.proxy(self.target)
        await client.set_enabled(proxy, True)

    def preflight(self, ctx: FaultContext) -> None:
        ctx.proxy(self.target)

    def touched(self, exposure: Exposure) -> Touched:
        start, end = exposure.injected_at, exposure.healed_at
        count = requests_on_link(exposure.events, self.target, start, end)
        count += client_failures(exposure.events, self.target, start, end)
        return Touched(count, f"requests on {self.target} cut, or failed by its client, while it was down")
