"""RayMode: what ``--rollout-chaos-ray`` asks for (off, a local cluster of N nodes, N hosts of network
namespaces on this machine, or an address)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

MAX_LOCAL_NODES: Final = 8
MAX_HOSTS: Final = 8
VALID: Final = (
    f"off, local (one node), local:N with N from 1 to {MAX_LOCAL_NODES}, "
    f"hosts:N with N from 1 to {MAX_HOSTS} (network namespaces as machines; root on Linux), "
    "or the HOST:PORT of a running cluster's GCS (what `ray start --head` prints), or auto"
)
_ADDRESS = re.compile(r"^(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>\d{1,5})$")


@dataclass(frozen=True, slots=True)
class RayMode:
    kind: Literal["off", "local", "hosts", "address"] = "off"
    nodes: int = 0  # local, hosts: how many nodes (hosts) this run starts
    address: str = ""  # address: the cluster to join

    @property
    def on(self) -> bool:
        return self.kind != "off"

    def describe(self) -> str:
        if self.kind in ("local", "hosts"):
            return f"{self.kind}:{self.nodes}"
        return self.address if self.kind == "address" else "off"


OFF: Final = RayMode()


def parse(text: str | None) -> RayMode:
    """The mode ``text`` names; ``ValueError`` says what is wrong (the caller adds where, what is valid)."""
    value = (text or "off").strip()
    if value == "off":
        return OFF
    if value == "local" or value.startswith("local:"):
        count = value.partition(":")[2] or "1"
        if not count.isdigit() or not 1 <= int(count) <= MAX_LOCAL_NODES:
            raise ValueError(f"the node count {count!r} is not a whole number from 1 to {MAX_LOCAL_NODES}")
        return RayMode("local", nodes=int(count))
    if value.startswith("hosts:"):
        count = value.partition(":")[2]
        if not count.isdigit() or not 1 <= int(count) <= MAX_HOSTS:
            raise ValueError(f"the host count {count!r} is not a whole number from 1 to {MAX_HOSTS}")
        return RayMode("hosts", nodes=int(count))
    if value == "auto":
        return RayMode("address", address="auto")
    if value.startswith("ray://"):
        raise ValueError("Ray Client addresses (ray://) cannot host servers: give the GCS address HOST:PORT")
    match = _ADDRESS.match(value)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise ValueError("it is neither off, local[:N], hosts:N nor HOST:PORT")
    return RayMode("address", address=value)
