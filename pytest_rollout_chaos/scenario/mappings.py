"""Field tables for YAML mappings, specs like those of ``spec``: ``Section`` (a fixed set of keys,
each a ``Field``), ``MappingOf`` (keys from a closed set) and ``DottedSettings``
(``TRAINER.dotted.key`` names). The first two read into a ``Parsed``, which keeps each key's line
for the rules between fields.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import yaml

from pytest_rollout_chaos.scenario.spec import (
    JsonSchema,
    Problems,
    Rejected,
    Spec,
    choices_text,
    did_you_mean,
    join,
    line_of,
    readable_items,
    scalar_value,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    """One key of a mapping: its spec, whether it must be present, its default and its meaning."""

    name: str
    spec: Spec
    doc: str
    required: bool = False
    default: Any = None


@dataclasses.dataclass(frozen=True, slots=True)
class Parsed:
    """A mapping read from YAML: values by key (defaults filled in) and the line of each key.

    A rejected mapping (``Rejected.partial``) lists its wrong or missing keys in ``bad``: they
    have no value, and ``parts`` keeps what could still be read of them.
    """

    values: Mapping[str, Any]
    line: int
    lines: Mapping[str, int]
    bad: frozenset[str] = frozenset()
    parts: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def part(self, key: str) -> Any:
        """The value of ``key``, else what could be read of it (``None`` when nothing)."""
        return self.values[key] if key in self.values else self.parts.get(key)

    def known(self, key: str) -> bool:
        """True when ``key`` holds a valid value (given or default)."""
        return key in self.values


@dataclasses.dataclass(frozen=True, slots=True)
class Section:
    """A mapping with a fixed set of keys; unknown keys are problems that list the valid ones."""

    fields: tuple[Field, ...]
    doc: str = ""

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> Parsed:
        by_name = {f.name: f for f in self.fields}
        values: dict[str, Any] = {}
        lines: dict[str, int] = {}
        bad: set[str] = set()
        parts: dict[str, Any] = {}
        present: set[str] = set()
        items, doubtful = readable_items(node, field, problems)
        failed = doubtful is not None
        for key, key_node, value_node in items:
            present.add(key)
            spec = by_name.get(key)
            if spec is None:
                problems.reject(
                    key_node,
                    join(field, key),
                    f"unknown key{did_you_mean(key, list(by_name))} (valid: {choices_text(list(by_name))})",
                )
                failed = True
                continue
            lines[key] = line_of(key_node)
            try:
                values[key] = spec.spec.parse(value_node, join(field, key), problems)
            except Rejected as rejected:
                failed = True
                bad.add(key)
                if rejected.partial is not None:
                    parts[key] = rejected.partial
        for spec in self.fields:
            if spec.name in present:
                continue
            if spec.required:
                problems.reject(node, join(field, spec.name), f"missing required key ({spec.doc})")
                failed = True
                bad.add(spec.name)
            else:
                values[spec.name] = spec.default
        for key in doubtful or ():  # which of the repeated values was meant is unknown
            values.pop(key, None)
            parts.pop(key, None)
            bad.add(key)
        parsed = Parsed(values, line_of(node), lines, frozenset(bad), parts)
        if failed:
            raise Rejected(parsed)
        return parsed

    def json_schema(self) -> JsonSchema:
        properties: JsonSchema = {}
        for spec in self.fields:
            schema = dict(spec.spec.json_schema())
            schema["description"] = spec.doc
            if spec.default is not None and not isinstance(spec.default, tuple):
                schema["default"] = spec.default
            properties[spec.name] = schema
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
        required = [spec.name for spec in self.fields if spec.required]
        if required:
            schema["required"] = required
        if self.doc:
            schema["description"] = self.doc
        return schema


@dataclasses.dataclass(frozen=True, slots=True)
class MappingOf:
    """A mapping whose keys are names from a closed set, each with a value read by ``value``.

    Read into a ``Parsed`` holding only the keys given, so rules can name each key's line.
    """

    keys: tuple[str, ...]
    value: Spec
    what: str = "name"
    min_items: int = 0

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> Parsed:
        values: dict[str, Any] = {}
        lines: dict[str, int] = {}
        bad: set[str] = set()
        items, doubtful = readable_items(node, field, problems)
        failed = doubtful is not None
        for key, key_node, value_node in items:
            if key not in self.keys:
                problems.reject(
                    key_node,
                    join(field, key),
                    f"unknown {self.what} {key!r}{did_you_mean(key, self.keys)} "
                    f"(valid: {choices_text(self.keys)})",
                )
                failed = True
                continue
            lines[key] = line_of(key_node)
            try:
                values[key] = self.value.parse(value_node, join(field, key), problems)
            except Rejected:
                failed = True
                bad.add(key)
        for key in doubtful or ():
            values.pop(key, None)
            bad.add(key)
        parsed = Parsed(values, line_of(node), lines, frozenset(bad))
        if not failed and len(values) < self.min_items:
            raise problems.reject(
                node,
                field,
                f"expected at least {self.min_items} {self.what} name(s), got {len(values)} "
                f"(valid: {choices_text(self.keys)})",
                parsed,
            )
        if failed:
            raise Rejected(parsed)
        return parsed

    def json_schema(self) -> JsonSchema:
        value = self.value.json_schema()
        schema: JsonSchema = {
            "type": "object",
            "properties": {key: dict(value) for key in self.keys},
            "additionalProperties": False,
        }
        if self.min_items:
            schema["minProperties"] = self.min_items
        return schema


@dataclasses.dataclass(frozen=True, slots=True)
class DottedSettings:
    """A mapping of ``TRAINER.dotted.key`` names to single values; ``TRAINER`` is one of ``firsts``.

    Values are scalars (string, number, boolean, null): one setting each, never a whole section.
    """

    firsts: tuple[str, ...]
    what: str = "setting"

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> dict[str, Any]:
        values: dict[str, Any] = {}
        items, doubtful = readable_items(node, field, problems)
        failed = doubtful is not None
        for key, key_node, value_node in items:
            first, dot, rest = key.partition(".")
            if first not in self.firsts or not dot or re.fullmatch(_DOTTED, rest) is None:
                problems.reject(
                    key_node,
                    join(field, key),
                    f"invalid {self.what} name {key!r} (valid: TRAINER.dotted.key, TRAINER one of "
                    f"{choices_text(self.firsts)})",
                )
                failed = True
                continue
            try:
                values[key] = scalar_value(value_node, join(field, key), problems)
            except Rejected:
                failed = True
        for key in doubtful or ():
            values.pop(key, None)
        if failed:
            raise Rejected(None)
        return values

    def json_schema(self) -> JsonSchema:
        firsts = "|".join(re.escape(first) for first in self.firsts)
        return {
            "type": "object",
            "patternProperties": {
                f"^(?:{firsts})\\.{_DOTTED}$": {"type": ["string", "number", "boolean", "null"]}
            },
            "additionalProperties": False,
        }


_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
