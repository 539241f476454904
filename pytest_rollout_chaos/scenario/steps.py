"""Specs of the fault steps and their triggers: kind, target, ``at``, ``duration_s`` and parameters.

A step's parameters depend on its kind and come from the fault registry (``params``), so the
step spec builds its JSON Schema as one alternative per kind.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import yaml

from pytest_rollout_chaos.scenario import mappings as m
from pytest_rollout_chaos.scenario import params as p
from pytest_rollout_chaos.scenario import spec as s
from pytest_rollout_chaos.scenario import vocabulary as v

SERVER_NAMES = v.SERVERS + v.AGENT_INSTANCES
TRIGGER_HELP = "start, after_completed: N, after_s: T, on_request: {server: NAME, nth: N}"

ON_REQUEST = m.Section(
    (
        m.Field("server", s.Choice(SERVER_NAMES, "server"), "the server whose request fires the fault", True),
        m.Field("nth", s.Integer(1), "fire on this request to that server (1 = the first)", default=1),
    )
)
_TRIGGER_VALUES: dict[str, s.Spec] = {
    "after_completed": s.Integer(1),
    "after_s": s.Number(),
    "on_request": ON_REQUEST,
}
_TRIGGER_DOCS = {
    "after_completed": "fire once this many rollouts have completed",
    "after_s": "fire this many seconds after the collection starts",
    "on_request": "fire when the server receives its nth request",
}


class ParsedTrigger(NamedTuple):
    """A parsed ``at``: the trigger kind, its value and the line of the key that names it."""

    kind: str
    value: Any
    line: int


@dataclasses.dataclass(frozen=True, slots=True)
class TriggerSpec:
    """``at``: ``start`` or a one-key mapping naming the trigger; parses to a ``ParsedTrigger``.

    When only the trigger's value is wrong, ``Rejected.partial`` is a ``ParsedTrigger`` holding
    what could be read of it (an ``on_request`` mapping with a bad ``server`` keeps its ``nth``).
    """

    def parse(self, node: yaml.Node, field: str, problems: s.Problems) -> ParsedTrigger:
        if isinstance(node, yaml.ScalarNode):
            value = s.scalar_value(node, field, problems)
            if value == "start":
                return ParsedTrigger("start", None, s.line_of(node))
            hint = s.did_you_mean(value, ["start", *_TRIGGER_VALUES])
            raise problems.reject(node, field, f"unknown trigger {value!r}{hint} (valid: {TRIGGER_HELP})")
        try:
            items = s.mapping_items(node, field, problems)
        except s.Rejected:
            raise s.Rejected() from None
        if len(items) != 1:
            names = ", ".join(key for key, _, _ in items) or "none"
            raise problems.reject(
                node, field, f"a trigger names exactly one kind, got {names} (valid: {TRIGGER_HELP})"
            )
        key, key_node, value_node = items[0]
        spec = _TRIGGER_VALUES.get(key)
        if spec is None:
            hint = s.did_you_mean(key, list(_TRIGGER_VALUES))
            message = f"unknown trigger{hint} (valid: {TRIGGER_HELP})"
            raise problems.reject(key_node, s.join(field, key), message)
        line = s.line_of(key_node)
        try:
            return ParsedTrigger(key, spec.parse(value_node, s.join(field, key), problems), line)
        except s.Rejected as rejected:
            partial = None if rejected.partial is None else ParsedTrigger(key, rejected.partial, line)
            raise s.Rejected(partial) from None

    def json_schema(self) -> s.JsonSchema:
        alternatives: list[s.JsonSchema] = [{"const": "start", "description": "fire when collection starts"}]
        for key, spec in _TRIGGER_VALUES.items():
            alternatives.append(
                {
                    "type": "object",
                    "properties": {key: spec.json_schema()},
                    "required": [key],
                    "additionalProperties": False,
                    "description": _TRIGGER_DOCS[key],
                }
            )
        return {"oneOf": alternatives}


_COMMON = (
    m.Field("kind", s.Choice(v.FAULT_KINDS, "fault kind"), "the fault kind", True),
    m.Field("target", s.Text(), "the server or link the fault acts on", True),
    m.Field("at", TriggerSpec(), f"when to inject: {TRIGGER_HELP}", default="start"),
    m.Field("duration_s", s.Number(0.0, exclusive=True), "heal after this long (default: at the end)"),
    m.Field(
        "expect_hits",
        s.Integer(0),
        "exactly how many requests the fault must touch (default: at least one; 0 for a fault meant "
        "to hit nothing)",
    ),
)
_COMMON_DOCS = {field.name: field.doc for field in _COMMON}


@dataclasses.dataclass(frozen=True, slots=True)
class FaultStepSpec:
    """One entry of ``faults``; parses to a ``Parsed`` whose values include ``params``."""

    def parse(self, node: yaml.Node, field: str, problems: s.Problems) -> m.Parsed:
        """The step, or ``Rejected`` whose ``partial`` is a ``Parsed`` of the keys that were fine.

        A wrong ``kind`` leaves its target and parameters unknowable, but ``at`` and
        ``duration_s`` are still checked, so one pass reports them too.
        """
        return _StepReader(node, field, problems).read()

    def json_schema(self) -> s.JsonSchema:
        alternatives = [self._kind_schema(kind) for kind in p.fault_kinds()]
        return {"type": "object", "required": ["kind"], "oneOf": alternatives}

    def _kind_schema(self, kind: str) -> s.JsonSchema:
        params = p.param_specs(kind)
        properties: s.JsonSchema = {}
        for field in _COMMON:
            properties[field.name] = {**field.spec.json_schema(), "description": field.doc}
        properties["kind"] = {"const": kind, "description": "the fault kind"}
        targets: s.JsonSchema = {"enum": list(v.targets_for(kind))}
        if (replicas := v.replica_pattern(kind)) is not None:
            targets = {"anyOf": [targets, {"type": "string", "pattern": replicas}]}
        properties["target"] = {**targets, "description": _COMMON_DOCS["target"]}
        required = ["kind"] if kind in v.FIXED_TARGETS else ["kind", "target"]
        schema: s.JsonSchema = {"type": "object", "properties": properties, "required": required}
        for name, param in params.items():
            param_schema = param.spec.json_schema()
            if param.nullable:
                param_schema = {"anyOf": [param_schema, {"type": "null"}]}
            properties[name] = {**param_schema, "description": param.help}
            if param.required:
                required.append(name)
        schema["additionalProperties"] = False
        return schema


@dataclasses.dataclass
class _StepReader:
    """Reads one fault step key by key, keeping what was fine when other keys are wrong."""

    node: yaml.Node
    field: str
    problems: s.Problems
    items: dict[str, tuple[yaml.Node, yaml.Node]] = dataclasses.field(default_factory=dict)
    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    bad: set[str] = dataclasses.field(default_factory=set)
    parts: dict[str, Any] = dataclasses.field(default_factory=dict)

    def read(self) -> m.Parsed:
        read, doubtful = s.readable_items(self.node, self.field, self.problems)
        self.items = {key: (key_node, value_node) for key, key_node, value_node in read}
        self.bad = set(doubtful or ())
        self.values = {
            "at": ParsedTrigger("start", None, s.line_of(self.node)),
            "duration_s": None,
            "expect_hits": None,
        }
        kind = self._kind()
        for key, (key_node, value_node) in self.items.items():
            try:
                self._read_key(kind, key, key_node, value_node)
            except s.Rejected as rejected:
                self.bad.add(key)
                if rejected.partial is not None:
                    self.parts[key] = rejected.partial
        if kind is not None:
            self._fill_required(kind)
            if not self.bad:
                self._build(kind)
            self.values["kind"] = kind
        for key in self.bad:
            self.values.pop(key, None)
            self.parameters.pop(key, None)
        self.values["params"] = self.parameters
        lines = {key: s.line_of(key_node) for key, (key_node, _) in self.items.items()}
        parsed = m.Parsed(self.values, s.line_of(self.node), lines, frozenset(self.bad), self.parts)
        if self.bad or doubtful is not None:
            raise s.Rejected(parsed)
        return parsed

    def _kind(self) -> str | None:
        """The step's kind; None when it is missing, unknown or given twice (which one was meant?)."""
        name = s.join(self.field, "kind")
        if "kind" not in self.items:
            self.problems.reject(self.node, name, f"missing required key (valid: {_kinds_text()})")
            self.bad.add("kind")
            return None
        try:
            kind = s.Choice(p.fault_kinds(), "fault kind").parse(self.items["kind"][1], name, self.problems)
        except s.Rejected:
            self.bad.add("kind")
            return None
        return None if "kind" in self.bad else kind

    def _read_key(self, kind: str | None, key: str, key_node: yaml.Node, value_node: yaml.Node) -> None:
        name = s.join(self.field, key)
        if key == "at":
            self.values[key] = TriggerSpec().parse(value_node, name, self.problems)
        elif key == "duration_s":
            self.values[key] = s.Number(0.0, exclusive=True).parse(value_node, name, self.problems)
        elif key == "expect_hits":
            self.values[key] = s.Integer(0).parse(value_node, name, self.problems)
        elif key == "kind" or kind is None:
            return  # without a kind, its target and parameters cannot be judged
        elif key == "target":
            self.values[key] = _parse_target(kind, value_node, name, self.problems)
        elif key in (params := p.param_specs(kind)):
            self.parameters[key] = _parse_param(params[key], value_node, name, self.problems)
        else:
            keys = [*_COMMON_DOCS, *params]
            hint = s.did_you_mean(key, keys)
            raise self.problems.reject(
                key_node, name, f"unknown key for a {kind} fault{hint} (valid: {', '.join(keys)})"
            )

    def _fill_required(self, kind: str) -> None:
        """Fill a fixed target; report a missing target or required parameter."""
        if "target" not in self.items:
            fixed = v.FIXED_TARGETS.get(kind)
            if fixed is None:
                self.problems.reject(self.node, s.join(self.field, "target"), _missing_target(kind))
                self.bad.add("target")
            else:
                self.values["target"] = fixed[0]
        for name, param in p.param_specs(kind).items():
            # Defaults stay with the fault class; the step keeps what the author wrote.
            if name not in self.items and param.required:
                message = f"missing required parameter ({param.help})"
                self.problems.reject(self.node, s.join(self.field, name), message)
                self.bad.add(name)

    def _build(self, kind: str) -> None:
        """The registry has the last word; point at the key it names when there is one."""
        try:
            p.build_fault(kind, self.values["target"], self.parameters)
        except p.FaultParameterError as exc:
            key_node = self.items[exc.field][0] if exc.field in self.items else self.node
            message = str(exc).removeprefix(f"{exc.field}: ")
            self.problems.reject(key_node, s.join(self.field, exc.field or "kind"), message)
            self.bad.add(exc.field or "(step)")


def _parse_target(kind: str, node: yaml.Node, field: str, problems: s.Problems) -> str:
    target = s.scalar_value(node, field, problems)
    if not isinstance(target, str) or not v.valid_target(kind, target):
        raise problems.reject(
            node, field, f"invalid target {target!r} for a {kind} fault (valid: {v.targets_text(kind)})"
        )
    return str(target)


def _parse_param(param: p.Param, node: yaml.Node, field: str, problems: s.Problems) -> Any:
    if param.nullable and isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
        return None
    return param.spec.parse(node, field, problems)


def _missing_target(kind: str) -> str:
    return f"missing required key (valid: {v.targets_text(kind)})"


def _kinds_text() -> str:
    return ", ".join(p.fault_kinds())
