"""The fault interface, its optional abilities, and the context every fault acts through.

Author contract (one module per kind, listed in ``registry.FAULT_TYPES``):

1. A fault is a frozen slots dataclass with ``kind: ClassVar[str]`` (snake_case of the class
   name), a ``target: str`` (a server name; a link name for network faults), and parameters
   with units in their names (``latency_ms``, ``rate_kbps``). Describe each parameter with
   ``field(metadata=param("why", minimum=...))`` so the registry can validate scenario input
   and generate JSON Schema (a fault-layer fault reads its effect's parameters from the layer
   with ``_layer_fault.effect_param`` instead). ``duration_s`` is the scheduler's business,
   never a field.
2. It declares its facts, which everything else reads from the registry: ``family`` (network,
   process, ray, semantic), ``targets`` (``"links"``, ``"servers"``, or the fixed names it acts
   on) and ``needs`` (``Need``: what a run must have for it to act; a scenario whose fault
   cannot act skips with the reason). The shared shapes (``_toxic_fault.ToxicFault``,
   ``_layer_fault.LayerFault``, ``_process_fault.ProcessFault``, ``_ray_fault.RayFault``) set them.
3. ``async inject(ctx) -> Mapping[str, object]`` does the damage and returns facts worth
   recording (``{"oom": "kernel"}``); it must not wait for the fault's duration.
4. ``async heal(ctx) -> None`` undoes it. It is idempotent and always runs, in a ``finally``,
   even when ``inject`` failed half-way, so it must cope with "nothing to undo".
5. ``touched(exposure) -> Touched`` counts, from the History, what it touched while it was on
   (the requests its rule hit, the requests on its link, the requests into its server); a fault
   that touched nothing of the collection tested nothing, and the run fails (see ``touch``).
6. Faults never judge: no asserts about the system under test. They raise ``FaultError``
   only when they cannot do their job (no such server, no proxy, a control call failed).
7. Recording into the History, timing and heal-on-every-path are written once in
   ``faults.apply``; a fault never appends its own inject/heal events.
8. Optional abilities are small Protocols checked with ``isinstance``: ``Preflight``
   (refuse early, before anything is touched) and ``Terminating`` (the target process ends).
"""

from __future__ import annotations

import asyncio
import enum
import random
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.history import Event, History
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.servers.toxiproxy.client import ProxyInfo

Family = Literal["network", "process", "ray", "semantic"]
# ``links``: any link of the stack; ``servers``: any server (``agent`` standing for every agent
# instance); a tuple: exactly those names (the first is the default when a step names none).
Targets = Literal["links", "servers"] | tuple[str, ...]


class Need(enum.Enum):
    """What a fault needs to act; its value says it in words (the docs' "needs" line).

    A run that lacks one of a fault's needs skips the scenario (or refuses the ``chaos_faults``
    inject) with the reason, before anything is touched; ``acting.cannot_act`` checks them.
    """

    LINK = "a Toxiproxy proxy on the link"
    FAULT_LAYER = "the fault layer in front of the target server"
    PROCESS = "the target's server process, started by this run (not an external server)"
    RAY_ACTOR = "the target server in a Ray actor (--rollout-chaos-ray)"
    RAY_NODE = (
        "the target server on a Ray node this run can remove: a worker node of "
        "--rollout-chaos-ray=local:N (N >= 2), or a host of hosts:N"
    )
    HOST = "the target server on a host of its own (--rollout-chaos-ray=hosts:N)"
    HERE = "the target's processes on pytest's machine, where /proc shows them (not on another host)"
    GYM_CLIENT = "the Gym client handed to the collector"
    COLLECTION = "the collection under way (its task)"


@dataclass(frozen=True, slots=True)
class Exposure:
    """One injected fault's time on the system, in plain values: what ``Fault.touched`` reads.

    ``injected_at`` is when its inject began, ``returned_at`` when the inject returned (a
    ``restart`` is over by then), ``healed_at`` when its heal began, or the end of what is
    judged when it held to the end. ``events`` are the History's, all of them.
    """

    injected_at: float
    returned_at: float
    healed_at: float
    facts: Mapping[str, object]
    events: Sequence[Event]


@dataclass(frozen=True, slots=True)
class Touched:
    """How much one fault touched, and of what (``"requests hit by its rule"``)."""

    count: int
    counted: str


@runtime_checkable
class Fault(Protocol):
    """One injectable fault; see the module docstring for the contract."""

    kind: ClassVar[str]
    family: ClassVar[Family]
    targets: ClassVar[Targets]
    needs: ClassVar[tuple[Need, ...]]

    @property
    def target(self) -> str: ...

    async def inject(self, ctx: FaultContext) -> Mapping[str, object]: ...

    async def heal(self, ctx: FaultContext) -> None: ...

    def touched(self, exposure: Exposure) -> Touched:
        """What it touched while it was on, counted from ``exposure.events``."""
        ...


@runtime_checkable
class Preflight(Protocol):
    """A fault that can tell, before injecting, that this context cannot support it."""

    def preflight(self, ctx: FaultContext) -> None:
        """Raise ``FaultError`` saying what is missing; return None when all is there."""
        ...


@runtime_checkable
class Terminating(Protocol):
    """A fault whose inject ends the target process (its heal brings it back)."""

    terminates_target: ClassVar[bool]


class ToxicControl(Protocol):
    """The part of the Toxiproxy client network faults use (``servers.toxiproxy.client``)."""

    async def add_toxic(
        self,
        proxy: str,
        *,
        type: str,
        attributes: Mapping[str, Any],
        name: str | None = None,
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> object: ...

    async def remove_toxic(self, proxy: str, toxic_name: str) -> None: ...

    async def set_enabled(self, name: str, enabled: bool) -> object: ...

    async def proxy(self, name: str) -> ProxyInfo: ...


class CollectionHandle:
    """The collection under way, for the one fault that acts on the caller's side: ``cancel``.

    Whoever runs the collection ``attach``es its task; ``cancel`` cancels it, as a trainer's
    step timeout or a shutdown cancels its rollout task from outside.
    """

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None

    def attach(self, task: asyncio.Task[Any]) -> None:
        self._task = task

    @property
    def attached(self) -> bool:
        return self._task is not None

    def cancel(self) -> bool:
        """Cancel the collection; False when none is running (not attached, or already done)."""
        return self._task is not None and not self._task.done() and self._task.cancel()


def param(help: str, *, minimum: float | None = None, maximum: float | None = None) -> dict[str, Any]:
    """Field metadata for a fault parameter: a help line and optional bounds."""
    return {"help": help, "minimum": minimum, "maximum": maximum}


@dataclass(frozen=True)
class FaultContext:
    """What faults may touch: servers, proxies, the fault layer, the Gym client, the collection; and
    the History.

    Creating one records every exit of the given processes in the History (``source
    "process"``, op ``"exit"``, ``{server, code, signal}``), so a fault-killed server is
    reported as killed even though the fault marked the exit as expected.
    """

    history: History
    processes: Mapping[str, ManagedProcess] = field(default_factory=dict)
    toxiproxy: ToxicControl | None = None
    links: Mapping[str, str] = field(default_factory=dict)
    fault_layer: str | None = None  # the fault layer's control URL
    gym_client: object | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    # servers that exist but are not processes of this run (an external policy) -> why
    unmanaged: Mapping[str, str] = field(default_factory=dict)
    collection: CollectionHandle = field(default_factory=CollectionHandle)

    def __post_init__(self) -> None:
        for process in self.processes.values():
            record_exits(self.history, process)

    def process(self, target: str) -> ManagedProcess:
        """The managed server named ``target``, or a ``FaultError`` listing the known ones."""
        if target in self.unmanaged:
            raise FaultError(f"target {target!r}: {self.unmanaged[target]}")
        try:
            return self.processes[target]
        except KeyError:
            known = ", ".join(sorted(self.processes)) or "none"
            raise FaultError(f"target {target!r}: no such server (known servers: {known})") from None

    def layer_url(self) -> str:
        """The fault layer's control URL (semantic faults arm their rules there)."""
        if self.fault_layer is None:
            raise FaultError(
                "semantic faults act through the HTTP fault layer in front of the servers, "
                "and this context has none (use the chaos_stack fixtures, or pass fault_layer=)"
            )
        return self.fault_layer

    def proxy(self, link: str) -> tuple[ToxicControl, str]:
        """The Toxiproxy client and the proxy name of ``link``."""
        if self.toxiproxy is None:
            raise FaultError(
                f"link {link!r}: network faults need Toxiproxy, and this run has none "
                "(see --rollout-chaos-toxiproxy)"
            )
        try:
            return self.toxiproxy, self.links[link]
        except KeyError:
            known = ", ".join(sorted(self.links)) or "none"
            raise FaultError(f"target {link!r}: no such link (known links: {known})") from None


def fault_tag(fault: object) -> str:
    """A name unique to this fault object, for the toxic or hook rule it creates and removes."""
    return f"chaos-{getattr(fault, 'kind', type(fault).__name__)}-{id(fault):x}"


_exit_watch_lock = threading.Lock()
_exit_watched: weakref.WeakKeyDictionary[ManagedProcess, set[int]] = weakref.WeakKeyDictionary()


def record_exits(history: History, process: ManagedProcess) -> None:
    """Append a ``process``/``exit`` event to ``history`` whenever ``process`` exits (once per pair)."""
    with _exit_watch_lock:
        watched = _exit_watched.setdefault(process, set())
        if id(history) in watched:
            return
        watched.add(id(history))

    def on_exit(exited: ManagedProcess, code: int) -> None:
        signal_number = -code if code < 0 else None
        history.append(
            "process",
            "info",
            "exit",
            {
                "server": exited.name,
                "code": 128 + signal_number if signal_number is not None else code,
                "signal": signal_number,
            },
        )

    process.add_exit_listener(on_exit)
