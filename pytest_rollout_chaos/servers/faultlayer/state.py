"""What the fault layer holds between requests: links, armed rules, rows, and the event writer.

One ``LayerState`` per layer process. Links are added as the stack starts; rules are armed and
disarmed by faults; the row index is cleared with the rules at every scenario's reset. Every
rule hit is written as ``info`` op ``"hook"`` with ``{effect, rule, row, route, link, server}``
under the target server's source, next to the requests the layer records.

``Decisions`` is what a link's requests ask of the state: their row and the rules they fire on
arrival, what an answer teaches, a rule's memory, a hang's release. ``LayerState`` answers them
in its own process; a worker process of the layer (``worker``) asks the one ``LayerState`` over
its channel (``workers``), so every counter and row stays in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from pytest_rollout_chaos.history import EventWriter
from pytest_rollout_chaos.servers.faultlayer import rewrite
from pytest_rollout_chaos.servers.faultlayer.rows import SESSION_HEADER, RowIndex
from pytest_rollout_chaos.servers.faultlayer.rules import Rule, RuleError, parse_rule

if TYPE_CHECKING:
    from pytest_rollout_chaos.servers.faultlayer.downstream import Request

_MEMORY: Final = 256  # generations a prefix_drift rule remembers


@dataclass(frozen=True, slots=True)
class Link:
    """One arrow of the stack: clients of ``name`` reach ``upstream`` (server ``server``) through us."""

    name: str
    server: str  # the scenario name rules use: policy, model, resources, head, an agent instance
    source: str  # the History source its requests are recorded under: policy, model, agent, ...
    upstream: str  # http://host:port
    listen: str = ""  # host:port, once bound


# (quiet, the (server, route) pairs of the armed prefix_drift rules): what workers decide alone by
Summary = tuple[bool, tuple[tuple[str, str | None], ...]]


class Decisions(Protocol):
    """What a link's requests ask of the layer's state, wherever that state lives."""

    def writer(self, source: str) -> EventWriter:
        """This process's event writer for ``source``."""
        ...

    async def arrive(self, link: Link, request: Request, document: Any) -> tuple[int | None, list[Rule]]:
        """A request's row and the rules that fire on it (each rule counts it as a candidate)."""
        ...

    async def answered(
        self, link: Link, path: str, *, row: int | None, status: int, document: Any, set_cookies: list[str]
    ) -> None:
        """What an answer teaches before it leaves: a row's cookies and texts, watched generations."""
        ...

    async def memory(self, rule_id: str) -> list[list[int]]:
        """The generations a ``prefix_drift`` rule has seen."""
        ...

    async def hold(self, rule_id: str, max_s: float | None) -> None:
        """Wait until the ``hang`` rule is disarmed, at most ``max_s`` (None: no limit)."""
        ...


def record_hit(writer: EventWriter, link: Link, rule: Rule, row: int | None, path: str, **extra: Any) -> None:
    """Record that ``rule`` fired on a request of ``link`` (``info`` op ``hook``)."""
    data: Mapping[str, Any] = {
        "effect": rule.effect,
        "rule": rule.id,
        "row": row,
        "route": path,
        "link": link.name,
        "server": link.server,
        **extra,
    }
    writer.emit("info", "hook", data)


class LayerState:
    """Links, armed rules (with their counters), the row index and the writers per source."""

    def __init__(self) -> None:
        self.links: dict[str, Link] = {}
        self.rules: dict[str, Rule] = {}
        self.rows = RowIndex()
        self._ids = itertools.count(1)
        self._released: dict[str, asyncio.Event] = {}
        self._writers: dict[str, EventWriter] = {}
        # per prefix_drift rule: generated ids seen on its server, so drift lands in history
        self.seen_generations: dict[str, list[list[int]]] = {}
        # told when the summary changes: the workers' (``workers``) cue to ask, or not
        self.on_change: Callable[[Summary], Awaitable[None]] | None = None
        self._told: Summary = (True, ())
        self._telling: asyncio.Future[None] | None = None

    def quiet(self) -> bool:
        """No rule armed, no row known: a request without ``_rowidx`` has no row, no rule counts it."""
        return not self.rules and self.rows.empty()

    def summary(self) -> Summary:
        """Whether the state is quiet, and the routes (server, route) ``prefix_drift`` rules watch."""
        watched = {
            (rule.server, rule.match.route) for rule in self.rules.values() if rule.effect == "prefix_drift"
        }
        return self.quiet(), tuple(sorted(watched, key=repr))

    def settled(self) -> bool:
        """Does whoever ``on_change`` tells know the summary as it is now?"""
        return self.on_change is None or (self._telling is None and self.summary() == self._told)

    async def settle(self) -> None:
        """Tell ``on_change`` the summary when it changed, and wait until it knows: a request
        that follows, whichever process it reaches, is decided knowing it."""
        while not self.settled():
            if self._telling is not None:
                await asyncio.shield(self._telling)
                continue
            assert self.on_change is not None  # settled() otherwise
            self._told = self.summary()
            self._telling = asyncio.ensure_future(self.on_change(self._told))
            try:
                await asyncio.shield(self._telling)
            finally:
                self._telling = None

    def writer(self, source: str) -> EventWriter:
        """The event writer for ``source`` (all write to this process's one events file)."""
        if source not in self._writers:
            self._writers[source] = EventWriter(source)
        return self._writers[source]

    def servers(self) -> list[str]:
        return sorted({link.server for link in self.links.values()})

    def arm(self, body: object) -> Rule:
        rule = parse_rule(f"r{next(self._ids)}", body)
        if rule.server not in self.servers():
            known = ", ".join(self.servers()) or "none yet"
            raise RuleError(f"server: no link leads to {rule.server!r} (servers behind the layer: {known})")
        self.rules[rule.id] = rule
        return rule

    def disarm(self, rule_id: str) -> bool:
        rule = self.rules.pop(rule_id, None)
        self.seen_generations.pop(rule_id, None)
        released = self._released.pop(rule_id, None)
        if released is not None:
            released.set()
        return rule is not None

    def clear(self, tag: str | None = None) -> list[str]:
        chosen = [rule.id for rule in self.rules.values() if tag is None or rule.tag == tag]
        for rule_id in chosen:
            self.disarm(rule_id)
        return chosen

    def release_event(self, rule_id: str) -> asyncio.Event:
        return self._released.setdefault(rule_id, asyncio.Event())

    def firing(self, server: str, path: str, row: int | None) -> list[Rule]:
        # every rule sees every request, so each keeps an honest candidate count
        return [rule for rule in list(self.rules.values()) if rule.consider(server, path, row)]

    def observe_generations(self, server: str, path: str, document: Any) -> None:
        """Remember generated ids a prefix_drift rule may later aim at, also from requests it skips."""
        if document is not None and self.watching(server, path):
            self.observe(server, path, rewrite.generations(document))

    def observe(self, server: str, path: str, found: list[list[int]]) -> None:
        """Add generated ids of an answer on this route to every ``prefix_drift`` rule watching it."""
        for rule in list(self.rules.values()):
            if rule.effect == "prefix_drift" and rule.server == server and rule.match.route_matches(path):
                self.remember(rule.id, found)

    def remember(self, rule_id: str, found: list[list[int]]) -> list[list[int]]:
        """Add generations to a rule's memory (bounded: the latest ``_MEMORY`` kept); return it."""
        memory = self.seen_generations.setdefault(rule_id, [])
        memory.extend(found)
        del memory[:-_MEMORY]
        return memory

    async def arrive(self, link: Link, request: Request, document: Any) -> tuple[int | None, list[Rule]]:
        headers = request.headers
        decided = self.decide(
            link, request.path, document, headers.get("Cookie"), headers.get(SESSION_HEADER)
        )
        if not self.settled():
            await self.settle()
        return decided

    def decide(
        self, link: Link, path: str, document: Any, cookie: str | None, session: str | None
    ) -> tuple[int | None, list[Rule]]:
        """The row of a request and the rules that fire on it, in this order (see ``rows``)."""
        row = self.rows.row_of(document, cookie, stream=f"{link.name} {path}", session=session)
        return row, self.firing(link.server, path, row) if self.rules else []

    async def answered(
        self, link: Link, path: str, *, row: int | None, status: int, document: Any, set_cookies: list[str]
    ) -> None:
        if document is not None:
            self.observe_generations(link.server, path, document)
        if row is not None and status < 400:
            self.rows.learn_answer(row, document, set_cookies)
            if not self.settled():
                await self.settle()

    def learn(self, row: int | None, status: int, texts: Iterable[str], set_cookies: Iterable[str]) -> None:
        """``answered`` for an answer a worker read: the row's texts and cookies, found there."""
        if row is not None and status < 400:
            self.rows.learn(row, texts, set_cookies)

    def watching(self, server: str, path: str) -> bool:
        """Does a ``prefix_drift`` rule remember the generations of answers on this route?"""
        return any(
            rule.effect == "prefix_drift" and rule.server == server and rule.match.route_matches(path)
            for rule in self.rules.values()
        )

    async def memory(self, rule_id: str) -> list[list[int]]:
        return self.seen_generations.get(rule_id, [])

    async def hold(self, rule_id: str, max_s: float | None) -> None:
        released = self.release_event(rule_id)
        if rule_id not in self.rules:  # disarmed while the request was getting here
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(released.wait(), timeout=max_s)
