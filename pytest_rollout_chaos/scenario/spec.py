"""Specs of YAML values: one description drives the validator and the JSON Schema.

A ``Spec`` turns a composed YAML node into a plain Python value (recording a ``Problem``
with the node's line when the value is wrong) and says what JSON Schema it corresponds to.
Because both come from the same object, the schema cannot drift from what ``validate`` accepts.
Here: the problems, the node readers, the single values and lists; mappings are ``mappings``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

JsonSchema = dict[str, Any]

_STR_TAG = "tag:yaml.org,2002:str"
_NULL_TAG = "tag:yaml.org,2002:null"


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong in a scenario file, printed as ``path:line: field: message``."""

    path: Path
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.field}: {self.message}"


class Rejected(Exception):
    """A value was recorded as a problem; the enclosing mapping goes on with its other keys.

    ``partial`` is what could still be read of the value, so that rules relating it to other
    fields still run in the same pass: a ``Parsed`` whose ``bad`` keys are left out, a list with
    ``None`` for each rejected item. ``None`` when nothing could be read.
    """

    def __init__(self, partial: Any = None) -> None:
        super().__init__()
        self.partial = partial


class Problems:
    """The problems of one file, in the order found."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[Problem] = []

    def add(self, line: int, field: str, message: str) -> None:
        """Record a problem at ``line``."""
        self.items.append(Problem(self.path, line, field or "(top level)", message))

    def reject(self, node: yaml.Node, field: str, message: str, partial: Any = None) -> Rejected:
        """Record a problem at ``node`` and return the signal to raise."""
        self.add(line_of(node), field, message)
        return Rejected(partial)


def line_of(node: yaml.Node) -> int:
    """The 1-based line where ``node`` starts."""
    return int(node.start_mark.line) + 1


def join(parent: str, child: str | int) -> str:
    """The dotted field path of ``child`` inside ``parent`` (``faults[0].kind``)."""
    if isinstance(child, int):
        return f"{parent}[{child}]"
    return f"{parent}.{child}" if parent else child


def choices_text(choices: Sequence[str]) -> str:
    return ", ".join(choices)


def did_you_mean(value: object, choices: Sequence[str]) -> str:
    """``; did you mean 'latency'?`` when ``value`` is a near miss of one of ``choices``, else ``""``."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


_CONSTRUCTOR = yaml.SafeLoader("")


def scalar_value(node: yaml.Node, field: str, problems: Problems) -> object:
    """The Python value of a scalar node (int, float, bool, str or None), else a problem."""
    if not isinstance(node, yaml.ScalarNode):
        shape = "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"
        raise problems.reject(node, field, f"expected a single value, got {shape}")
    try:
        return _CONSTRUCTOR.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        raise problems.reject(node, field, f"cannot read the value: {exc}") from None


class Spec(Protocol):
    """How one field is read from YAML and described in JSON Schema."""

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> Any: ...

    def json_schema(self) -> JsonSchema: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Text:
    """A string, optionally matching a pattern (described for humans by ``what``)."""

    pattern: str | None = None
    what: str = "a non-empty string"
    allow_empty: bool = False

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> str:
        value = scalar_value(node, field, problems)
        if not isinstance(value, str) or node.tag != _STR_TAG or not (value.strip() or self.allow_empty):
            raise problems.reject(node, field, f"expected {self.what}, got {value!r} (valid: {self.what})")
        if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
            raise problems.reject(node, field, f"invalid value {value!r} (valid: {self.what})")
        return value

    def json_schema(self) -> JsonSchema:
        schema: JsonSchema = {"type": "string"} if self.allow_empty else {"type": "string", "minLength": 1}
        if self.pattern is not None:
            schema["pattern"] = f"^(?:{self.pattern})$"
        return schema


@dataclasses.dataclass(frozen=True, slots=True)
class Regex:
    """A string that must compile as a Python regular expression."""

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> str:
        value = Text(what="a regular expression").parse(node, field, problems)
        try:
            re.compile(value)
        except re.error as exc:
            raise problems.reject(node, field, f"invalid regular expression {value!r}: {exc}") from None
        return value

    def json_schema(self) -> JsonSchema:
        return {"type": "string", "minLength": 1, "format": "regex"}


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """One of a closed set of names; an unknown one lists the valid ones."""

    choices: tuple[str, ...]
    what: str = "value"

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> str:
        value = scalar_value(node, field, problems)
        if not isinstance(value, str) or value not in self.choices:
            raise problems.reject(
                node,
                field,
                f"unknown {self.what} {value!r}{did_you_mean(value, self.choices)} "
                f"(valid: {choices_text(self.choices)})",
            )
        return value

    def json_schema(self) -> JsonSchema:
        return {"type": "string", "enum": list(self.choices)}


@dataclasses.dataclass(frozen=True, slots=True)
class Integer:
    """A whole number, at least ``minimum`` when one is given."""

    minimum: int | None = 0
    maximum: int | None = None

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> int:
        value = scalar_value(node, field, problems)
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not _within(value, self.minimum, self.maximum)
        ):
            raise problems.reject(node, field, f"invalid value {value!r} (valid: {self._valid()})")
        return value

    def _valid(self) -> str:
        return "an integer" + _bounds_text(self.minimum, self.maximum, exclusive=False)

    def json_schema(self) -> JsonSchema:
        return {"type": "integer", **_bounds_schema(self.minimum, self.maximum, exclusive=False)}


@dataclasses.dataclass(frozen=True, slots=True)
class Number:
    """A finite number of some unit, at least ``minimum`` (above it when ``exclusive``)."""

    minimum: float | None = 0.0
    exclusive: bool = False
    maximum: float | None = None

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> float:
        value = scalar_value(node, field, problems)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not _within(value, self.minimum, self.maximum, exclusive=self.exclusive)
        ):
            raise problems.reject(node, field, f"invalid value {value!r} (valid: {self._valid()})")
        return float(value)

    def _valid(self) -> str:
        return "a number" + _bounds_text(self.minimum, self.maximum, exclusive=self.exclusive)

    def json_schema(self) -> JsonSchema:
        return {"type": "number", **_bounds_schema(self.minimum, self.maximum, exclusive=self.exclusive)}


def _within(value: float, minimum: float | None, maximum: float | None, *, exclusive: bool = False) -> bool:
    if minimum is not None and (value <= minimum if exclusive else value < minimum):
        return False
    return maximum is None or value <= maximum


def _bounds_text(minimum: float | None, maximum: float | None, *, exclusive: bool) -> str:
    parts = []
    if minimum is not None:
        parts.append(f"{'>' if exclusive else '>='} {minimum:g}")
    if maximum is not None:
        parts.append(f"<= {maximum:g}")
    return (" " + " and ".join(parts)) if parts else ""


def _bounds_schema(minimum: float | None, maximum: float | None, *, exclusive: bool) -> JsonSchema:
    schema: JsonSchema = {}
    if minimum is not None:
        schema["exclusiveMinimum" if exclusive else "minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


@dataclasses.dataclass(frozen=True, slots=True)
class Boolean:
    """``true`` or ``false``."""

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> bool:
        value = scalar_value(node, field, problems)
        if not isinstance(value, bool):
            raise problems.reject(node, field, f"invalid value {value!r} (valid: true, false)")
        return value

    def json_schema(self) -> JsonSchema:
        return {"type": "boolean"}


@dataclasses.dataclass(frozen=True, slots=True)
class ListOf:
    """A YAML list of ``item``; ``unique`` forbids repeats."""

    item: Spec
    min_items: int = 0
    unique: bool = False

    def parse(self, node: yaml.Node, field: str, problems: Problems) -> list[Any]:
        if not isinstance(node, yaml.SequenceNode):
            raise problems.reject(node, field, f"expected a list, got {describe_node(node)}")
        values: list[Any] = []
        failed = False
        for index, child in enumerate(node.value):
            try:
                value = self.item.parse(child, join(field, index), problems)
            except Rejected as rejected:
                failed = True
                values.append(rejected.partial)  # keeps the indexes of the items after it
                continue
            if self.unique and value in values:
                problems.reject(child, join(field, index), f"{value!r} is listed twice")
                failed = True
            values.append(value)
        if failed:
            raise Rejected(values)
        if len(values) < self.min_items:
            raise problems.reject(
                node, field, f"expected at least {self.min_items} item(s), got {len(values)}", values
            )
        return values

    def json_schema(self) -> JsonSchema:
        schema: JsonSchema = {"type": "array", "items": self.item.json_schema()}
        if self.min_items:
            schema["minItems"] = self.min_items
        if self.unique:
            schema["uniqueItems"] = True
        return schema


def describe_node(node: yaml.Node) -> str:
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if node.tag == _NULL_TAG:
        return "nothing (null)"
    return f"{node.value!r}"


MappingItems = list[tuple[str, yaml.Node, yaml.Node]]


def mapping_items(node: yaml.Node, field: str, problems: Problems) -> MappingItems:
    """The (key, key node, value node) of a mapping node; non-string or repeated keys are problems.

    When some keys are wrong, ``Rejected.partial`` holds ``(items, repeated key names)``: the
    readable items (the first of each repeated key) and the keys whose value is in doubt.
    """
    if not isinstance(node, yaml.MappingNode):
        raise problems.reject(node, field, f"expected a mapping, got {describe_node(node)}")
    items: MappingItems = []
    seen: set[str] = set()
    repeated: set[str] = set()
    failed = False
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if not isinstance(key, str) or key_node.tag != _STR_TAG:
            problems.reject(key_node, field, f"keys must be names, got {describe_node(key_node)}")
            failed = True
        elif key in seen:
            problems.reject(key_node, join(field, key), "key given twice")
            repeated.add(key)
            failed = True
        else:
            seen.add(key)
            items.append((key, key_node, value_node))
    if failed:
        raise Rejected((items, frozenset(repeated)))
    return items


def readable_items(
    node: yaml.Node, field: str, problems: Problems
) -> tuple[MappingItems, frozenset[str] | None]:
    """``mapping_items`` that goes on past wrong keys: the readable items, and ``None`` when every
    key was fine, else the repeated keys (whose value is in doubt)."""
    try:
        return mapping_items(node, field, problems), None
    except Rejected as rejected:
        if rejected.partial is None:
            raise
        items, repeated = rejected.partial
        return items, repeated
