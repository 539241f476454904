"""The shared shape of network faults: one Toxiproxy toxic on a link, removed on heal.

The toxic is named after the fault object (``fault_tag``), so healing removes exactly it and
a second heal finds nothing to remove, which is fine. A toxic acts on the answer (Toxiproxy's
downstream), so a request it slowed, held or cut still reaches the fault layer: what it touched
is the requests the layer saw on its link while it was on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

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
from pytest_rollout_chaos.faults.touch import requests_on_link


@dataclass(frozen=True, slots=True)
class ToxicFault:
    """Base of the toxic-backed faults: a link, the direction, and Toxiproxy's toxicity."""

    kind: ClassVar[str] = ""
    family: ClassVar[Family] = "network"
    targets: ClassVar[Targets] = "links"
    needs: ClassVar[tuple[Need, ...]] = (Need.LINK,)
    toxic_type: ClassVar[str] = ""

    target: str
    stream: Literal["downstream", "upstream"] = field(
        default="downstream",
        metadata=param("downstream = server to client, upstream = client to server"),
    )
    toxicity: float = field(
        default=1.0, metadata=param("chance per connection that the toxic applies", minimum=0.0, maximum=1.0)
    )

    def attributes(self) -> Mapping[str, Any]:
        raise NotImplementedError

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]:
        client, proxy = ctx.proxy(self.target)
        name = fault_tag(self)
        await client.add_toxic(
            proxy,
            type=self.toxic_type,
            attributes=dict(self.attributes()),
            name=name,
            stream=self.stream,
            toxicity=self.toxicity,
        )
        return {"proxy": proxy, "toxic": name}

    async def heal(self, ctx: FaultContext) -> None:
        client, proxy = ctx.proxy(self.target)
        await remove_quietly(client, proxy, fault_tag(self))

    def preflight(self, ctx: FaultContext) -> None:
        ctx.proxy(self.target)

    def touched(self, exposure: Exposure) -> Touched:
        count = requests_on_link(exposure.events, self.target, exposure.injected_at, exposure.healed_at)
        return Touched(count, f"requests on {self.target} while it was on")


async def remove_quietly(client: Any, proxy: str, toxic: str) -> None:
    """Remove ``toxic``; a toxic (or proxy) that is already gone counts as removed."""
    try:
        await client.remove_toxic(proxy, toxic)
    except Exception as error:
        if not _is_not_found(error):
            raise


def _is_not_found(error: Exception) -> bool:
    status = getattr(error, "status", None)
    return status == 404 or type(error).__name__ in {"NotFound", "NotFoundError", "ToxiproxyNotFoundError"}
