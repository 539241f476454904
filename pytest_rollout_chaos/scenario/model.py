"""The scenario model: frozen dataclasses and ``load_scenario``, which reads a ``*.chaos.yaml`` file.

Files are parsed with PyYAML's safe loader through ``yaml.compose``, so every node keeps its
line, and validated against ``tables`` and, in the same pass, against the rules that relate
one part of the file to another (``relations``). Every problem reads
``path:line: field.path: what is wrong (valid: ...)``; all problems of a file are reported at once.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from pytest_rollout_chaos.errors import ScenarioError
from pytest_rollout_chaos.scenario import mappings as m
from pytest_rollout_chaos.scenario import relations, tables
from pytest_rollout_chaos.scenario import spec as s
from pytest_rollout_chaos.scenario import vocabulary as v
from pytest_rollout_chaos.scenario.vocabulary import Mode, Style, TriggerKind

SUFFIX = ".chaos.yaml"


class ScenarioFileError(ScenarioError):
    """A scenario file has problems; ``problems`` lists each one with its line."""

    def __init__(self, problems: tuple[s.Problem, ...]) -> None:
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = problems


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyOptions:
    splice_prefix: bool = True
    ready_delay_s: float = 0.0
    replicas: int | None = None  # None: as many as the run starts (--rollout-chaos-policy-replicas)
    seed: int | None = None  # None: the session's sequence of sampling seeds goes on
    stop: tuple[str, ...] = ()  # stop strings the model server asks every generation to end at


@dataclasses.dataclass(frozen=True, slots=True)
class StackSpec:
    servers: tuple[str, ...] = v.SERVERS
    agents: int = 1
    env_latency_ms_per_call: float = 0.0
    env_latency_ms_per_item: float = 0.0
    rescore_bonus: float = 0.0
    reward_spread: float = 0.0
    policy: PolicyOptions = PolicyOptions()


@dataclasses.dataclass(frozen=True, slots=True)
class Workload:
    rows_per_task: int = 4
    generations_per_prompt: int = 1
    mode: Mode = "train"
    style: Style = "gym"
    tasks: tuple[str, ...] = (v.TASK_NAMES[0],)
    max_output_tokens: int | None = None  # None: the stack's default limit
    max_concurrency: int | None = None  # None: the collector's own limit
    collections: int = 1  # collect calls in a row on one collector: a trainer's steps
    row_ids: v.RowIds = "positions"
    order: v.RowOrder = "by_task"
    trainer_config: Mapping[str, Any] = dataclasses.field(default_factory=lambda: types.MappingProxyType({}))

    @property
    def total_rollouts(self) -> int:
        """Rollouts the collector must return: rows per task x tasks x generations per prompt."""
        return self.rows_per_task * len(self.tasks) * self.generations_per_prompt


@dataclasses.dataclass(frozen=True, slots=True)
class Trigger:
    """When a fault is injected; only the field of ``kind`` is set."""

    kind: TriggerKind = "start"
    completed: int | None = None
    after_s: float | None = None
    server: str | None = None
    nth: int | None = None
    route: str | None = None  # on_request: only its requests on this route count (a retrigger's; None: all)

    def describe(self) -> str:
        if self.kind == "after_completed":
            return f"after {self.completed} completed"
        if self.kind == "after_s":
            return f"at t={self.after_s:g}s"
        if self.kind == "on_request":
            return f"on request #{self.nth} to {self.server}" + (f" {self.route}" if self.route else "")
        return "at start"

    def to_yaml(self) -> object:
        """The YAML form, as ``at:`` holds it."""
        if self.kind == "after_completed":
            return {"after_completed": self.completed}
        if self.kind == "after_s":
            return {"after_s": self.after_s}
        if self.kind == "on_request":
            return {"on_request": {"server": self.server, "nth": self.nth}}
        return "start"


@dataclasses.dataclass(frozen=True, slots=True)
class FaultStep:
    """One fault: what, where, when, for how long (``None``: until the end) and its parameters."""

    kind: str
    target: str
    at: Trigger = Trigger()
    duration_s: float | None = None
    params: Mapping[str, Any] = dataclasses.field(default_factory=lambda: types.MappingProxyType({}))
    line: int = dataclasses.field(default=0, compare=False)
    expect_hits: int | None = None  # None: at least one request touched

    def describe(self) -> str:
        """``latency(latency_ms=800) on agent->model after 2 completed for 5s``."""
        arguments = ", ".join(f"{key}={value!r}" for key, value in self.params.items())
        text = f"{self.kind}({arguments}) on {self.target} {self.at.describe()}"
        return text + (f" for {self.duration_s:g}s" if self.duration_s is not None else "")

    def to_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "target": self.target, "at": self.at.to_yaml()}
        if self.duration_s is not None:
            data["duration_s"] = self.duration_s
        if self.expect_hits is not None:
            data["expect_hits"] = self.expect_hits
        data.update(self.params)
        return data


@dataclasses.dataclass(frozen=True, slots=True)
class Raises:
    type: str
    match: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RolloutConditions:
    all_completed: bool | None = None
    aborted_max: int | None = None
    aborted_rows: tuple[int, ...] | None = None
    min_completed: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Expectation:
    """``expect:``; ``not_judged`` maps a listed invariant to why it may judge nothing here, and
    ``witness`` a witness name to the least count the run must show."""

    invariants: tuple[str, ...]
    raises: Raises | None = None
    rollouts: RolloutConditions | None = None
    within_s: float = 60.0
    not_judged: Mapping[str, str] = dataclasses.field(default_factory=lambda: types.MappingProxyType({}))
    witness: Mapping[str, int] = dataclasses.field(default_factory=lambda: types.MappingProxyType({}))


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    """One validated scenario file."""

    name: str
    description: str
    expect: Expectation
    tags: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()
    stack: StackSpec = StackSpec()
    workload: Workload = Workload()
    faults: tuple[FaultStep, ...] = ()
    path: Path = dataclasses.field(default=Path("<memory>"), compare=False)
    line: int = dataclasses.field(default=1, compare=False)

    @property
    def summary(self) -> str:
        """The first line of the description."""
        return self.description.strip().splitlines()[0]


def scenario_files(paths: Iterable[Path]) -> list[Path]:
    """Files as given, and every ``*.chaos.yaml`` below the folders given, in a stable order."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob(f"*{SUFFIX}")) if path.is_dir() else [path])
    return files


def load_scenario(path: Path | str, *, shown_as: Path | None = None, policy_replicas: int = 1) -> Scenario:
    """Read and validate one scenario file; raise ``ScenarioFileError`` listing every problem.

    Messages and ``Scenario.path`` use ``shown_as`` when given (a path relative to where the user is).
    ``policy_replicas`` is how many policy replicas the run starts (``policy[i]`` targets are checked
    against it) unless the file asks for its own (``stack.policy.replicas``).
    """
    path = Path(path)
    shown = shown_as if shown_as is not None else path
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioFileError((s.Problem(shown, 1, "(file)", f"cannot read: {exc}"),)) from None
    return parse_scenario(text, shown, policy_replicas=policy_replicas)


def parse_scenario(text: str, path: Path, *, policy_replicas: int = 1) -> Scenario:
    """Validate scenario ``text`` (read from ``path``, used in messages); ``policy_replicas`` as in
    ``load_scenario``."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        raise ScenarioFileError((_yaml_problem(exc, text, path),)) from None
    except yaml.YAMLError as exc:
        raise ScenarioFileError((s.Problem(path, 1, "(yaml)", f"not valid YAML: {exc}"),)) from None
    problems = s.Problems(path)
    if root is None:
        valid = ", ".join(field.name for field in tables.SCENARIO.fields)
        raise ScenarioFileError(
            (s.Problem(path, 1, "(top level)", f"the file is empty (valid keys: {valid})"),)
        )
    parsed: m.Parsed | None
    try:
        parsed = tables.SCENARIO.parse(root, "", problems)
    except s.Rejected as rejected:
        parsed = rejected.partial
    if parsed is not None:
        relations.check(parsed, problems, policy_replicas=policy_replicas)
    if problems.items or parsed is None:
        raise ScenarioFileError(tuple(sorted(problems.items, key=lambda problem: problem.line)))
    return _build(parsed, path)


# What PyYAML says it was inside when a bracket or quote it opened was never closed.
_OPENED_CONTEXTS = (
    "while parsing a flow sequence",
    "while parsing a flow mapping",
    "while scanning a quoted scalar",
)


def _yaml_problem(exc: yaml.MarkedYAMLError, text: str, path: Path) -> s.Problem:
    """The YAML error at the line to fix: for a ``[``, ``{`` or quote never closed, where it opened
    (the parser only notices at the next token it cannot take, often the end of the file), with
    where it noticed; otherwise where the parser stopped."""
    opened, noticed = exc.context_mark, exc.problem_mark
    if exc.context in _OPENED_CONTEXTS and opened is not None and noticed is not None:
        lines = text.splitlines()
        row = lines[opened.line] if opened.line < len(lines) else ""
        char = row[opened.column] if opened.column < len(row) else ""
        opener = f"quote {char}" if char in "'\"" else f"'{char}'" if char else "bracket"
        where = (
            "the end of the file"
            if noticed.index >= len(text.rstrip())
            else f"line {noticed.line + 1}, column {noticed.column + 1}"
        )
        return s.Problem(
            path,
            opened.line + 1,
            "(yaml)",
            f"not valid YAML: the {opener} at line {opened.line + 1}, column {opened.column + 1} is "
            f"never closed (noticed at {where}: {exc.problem})",
        )
    mark = noticed or opened
    what = ", ".join(part for part in (exc.context, exc.problem) if part)
    return s.Problem(path, mark.line + 1 if mark is not None else 1, "(yaml)", f"not valid YAML: {what}")


def _build(parsed: m.Parsed, path: Path) -> Scenario:
    stack = parsed["stack"]
    workload = parsed["workload"]
    expect = parsed["expect"]
    return Scenario(
        name=parsed["name"],
        description=parsed["description"].strip(),
        tags=tuple(parsed["tags"]),
        upstream=tuple(parsed["upstream"]),
        stack=_stack(stack) if stack is not None else StackSpec(),
        workload=_workload(workload) if workload is not None else Workload(),
        faults=tuple(_step(step) for step in parsed["faults"]),
        expect=_expectation(expect),
        path=path,
        line=parsed.lines.get("name", parsed.line),
    )


def _stack(parsed: m.Parsed) -> StackSpec:
    policy = parsed["policy"]
    return StackSpec(
        servers=tuple(parsed["servers"]),
        agents=parsed["agents"],
        env_latency_ms_per_call=parsed["env_latency_ms_per_call"],
        env_latency_ms_per_item=parsed["env_latency_ms_per_item"],
        rescore_bonus=parsed["rescore_bonus"],
        reward_spread=parsed["reward_spread"],
        policy=_policy(policy) if policy is not None else PolicyOptions(),
    )


def _policy(parsed: m.Parsed) -> PolicyOptions:
    values = dict(parsed.values)
    values["stop"] = tuple(values["stop"])
    return PolicyOptions(**values)


def _workload(parsed: m.Parsed) -> Workload:
    values = dict(parsed.values)
    values["tasks"] = tuple(values["tasks"])
    values["trainer_config"] = types.MappingProxyType(dict(values["trainer_config"] or {}))
    return Workload(**values)


def _step(parsed: m.Parsed) -> FaultStep:
    kind, value, _ = parsed["at"]
    if kind == "after_completed":
        trigger = Trigger("after_completed", completed=value)
    elif kind == "after_s":
        trigger = Trigger("after_s", after_s=value)
    elif kind == "on_request":
        trigger = Trigger("on_request", server=value["server"], nth=value["nth"])
    else:
        trigger = Trigger()
    return FaultStep(
        kind=parsed["kind"],
        target=parsed["target"],
        at=trigger,
        duration_s=parsed["duration_s"],
        params=types.MappingProxyType(dict(parsed["params"])),
        line=parsed.line,
        expect_hits=parsed["expect_hits"],
    )


def _expectation(parsed: m.Parsed) -> Expectation:
    raises = parsed["raises"]
    rollouts = parsed["rollouts"]
    conditions = None
    if rollouts is not None:
        values = dict(rollouts.values)
        if values["aborted_rows"] is not None:
            values["aborted_rows"] = tuple(values["aborted_rows"])
        conditions = RolloutConditions(**values)
    not_judged, witness = parsed["not_judged"], parsed["witness"]
    return Expectation(
        invariants=tuple(parsed["invariants"]),
        raises=Raises(**raises.values) if raises is not None else None,
        rollouts=conditions,
        within_s=parsed["within_s"],
        not_judged=types.MappingProxyType(dict(not_judged.values) if not_judged is not None else {}),
        witness=types.MappingProxyType(dict(witness.values) if witness is not None else {}),
    )
