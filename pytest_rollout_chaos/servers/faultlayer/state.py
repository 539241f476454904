"""What the fault layer holds between requests: links, armed rules, rows, and the event writer.

One ``LayerState`` per layer process. Links are added as the stack starts; rules are armed and
disarmed by faults; the row index is cleared with the rules at every scenario's reset. Every
rule hit is written as ``info`` op ``"hook"`` with ``{effect, rule, row, route, link, server}``
under the target server's source, next to the requests the layer records.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pytest_rollout_chaos.history import EventWriter
from pytest_rollout_chaos.servers.faultlayer import rewrite
from pytest_rollout_chaos.servers.faultlayer.rows import RowIndex
from pytest_rollout_chaos.servers.faultlayer.rules import Rule, RuleError, parse_rule

_MEMORY: Final = 256  # generations a prefix_drift rule remembers


@dataclass(frozen=True, slots=True)
class Link:
    """One arrow of the stack: clients of ``name`` reach ``upstream`` (server ``server``) through us."""

    name: str
    server: str  # the scenario name rules use: policy, model, resources, head, an agent instance
    source: str  # the History source its requests are recorded under: policy, model, agent, ...
    upstream: str  # http://host:port
    listen: str = ""  # host:port, once bound


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
        watching = [
            rule.id
            for rule in self.rules.values()
            if rule.effect == "prefix_drift" and rule.server == server and rule.match.route_matches(path)
        ]
        if not watching or document is None:
            return
        found = rewrite.generations(document)
        for rule_id in watching:
            self.remember(rule_id, found)

    def remember(self, rule_id: str, found: list[list[int]]) -> list[list[int]]:
        """Add generations to a rule's memory (bounded: the latest ``_MEMORY`` kept); return it."""
        memory = self.seen_generations.setdefault(rule_id, [])
        memory.extend(found)
        del memory[:-_MEMORY]
        return memory

    def record_hit(self, link: Link, rule: Rule, row: int | None, path: str, **extra: Any) -> None:
        data: Mapping[str, Any] = {
            "effect": rule.effect,
            "rule": rule.id,
            "row": row,
            "route": path,
            "link": link.name,
            "server": link.server,
            **extra,
        }
        self.writer(link.source).emit("info", "hook", data)
