"""Drawn variants of a scenario, as a trainer's batches vary, and the smaller draws a failing one shrinks to.

A catalog scenario's workload has one shape: a few rows of one task, ids 0..N-1 in list order,
faults firing at one fixed request. A collector bug can hide behind that shape. ``draw`` varies
it along the dimensions below, each from the run's seed, the scenario's name and the draw's
index (the same draw on every machine):

- more rows per task (up to ``MAX_ROWS`` in all), a second task (last where rows are named by id,
  so a named row keeps its task), the tasks interleaved or shuffled group by group, ids that are
  offset or sparse instead of positions;
- where rows come in GRPO groups, another group size (with rows per task raised so every row the
  scenario names still exists), and the members scored apart (``stack.reward_spread``);
- a concurrency limit below the rows (``workload.max_concurrency``), so rows queue behind others;
- a slower environment (``stack.env_latency_ms_per_call``), so rows wait behind each other;
- each fault firing at a neighbouring request (``on_request.nth``, ``after_completed``);
- the tiny policy's own sampling seed (``stack.policy.seed``), so a draw samples the same tokens
  wherever it runs and when its file is run again;
- now and then a next step or two on the same collector (``workload.collections``), where the
  scenario runs one collection: what a failed step leaves behind in the collector shows there.

A draw is a list of edits to the scenario's YAML document, so the format's own reader validates
it (a draw the format refuses is never run) and a failing draw is written back as a file the user
keeps. The scenario's ``expect:`` holds for every draw: the layout is not drawn where the scenario
names rows by id (a fault's ``row``, ``expect.rollouts.aborted_rows``), nor a group size at which
every group holds a row it expects aborted (nothing would be left to train on). The collections come from
a stream of their own and go last, left out where the format refuses them (a fault that leaves
its server down), so they change no other dimension's draw. ``smaller`` undoes one edit at a
time (never the seed, which the failure may need), which is how a failing draw shrinks: undoing the
collections goes back to one.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from pytest_rollout_chaos.scenario import vocabulary as v
from pytest_rollout_chaos.scenario.model import Scenario, ScenarioFileError, parse_scenario

MAX_ROWS: Final = 24  # rows in one drawn collection, so a draw runs in seconds on two cores
SEED_PATH: Final = "stack.policy.seed"
ENV_LATENCIES_MS: Final = (10.0, 25.0, 50.0)
GROUP_SIZES: Final = (2, 3, 4, 5)
REWARD_SPREAD: Final = 0.25
ATTEMPTS: Final = 5
GROUP_PATH: Final = "workload.generations_per_prompt"
ROWS_PATH: Final = "workload.rows_per_task"
COLLECTIONS_PATH: Final = "workload.collections"
MORE_COLLECTIONS: Final = (2, 3)  # a next step or two: seconds more on two cores
MORE_COLLECTIONS_CHANCE: Final = 0.25

Edit = tuple[str, Any]  # ("workload.rows_per_task", 9): a dotted path in the document, its new value


@dataclass(frozen=True, slots=True)
class Draw:
    """One variant of ``original``: its edits, the YAML document they give and the scenario it reads as."""

    original: Scenario
    index: int
    edits: tuple[Edit, ...]
    text: str
    scenario: Scenario

    @property
    def name(self) -> str:
        return self.scenario.name

    def describe(self) -> list[str]:
        """One line per edit: the path, what the scenario had, what the draw has."""
        return [f"{path}: {_get(self.original, path)!r} -> {value!r}" for path, value in self.edits]


def draw(original: Scenario, text: str, *, seed: int, index: int) -> Draw:
    """Draw ``index`` of ``original`` (read from ``text``) under the run's ``seed``: the seed edit and
    at least one other, then now and then more collections. ``DrawError`` when the scenario leaves
    nothing to vary."""
    rng = random.Random(f"{seed}:{original.name}:{index}")
    next_steps = _more_collections(original, random.Random(f"{seed}:{original.name}:{index}:collections"))
    refused = ""
    for _ in range(ATTEMPTS):
        offered = list(_dimensions(original, rng))
        if not offered:
            raise DrawError(f"{original.name}: nothing in this scenario can be varied")
        chosen = [edits for edits in offered if rng.random() < 0.5] or [rng.choice(offered)]
        flat = tuple({path: value for edits in chosen for path, value in edits}.items())  # the last wins
        try:
            made = _read(original, text, index, ((SEED_PATH, rng.randrange(2**31)), *flat))
        except DrawError as error:  # the format refused this combination: draw again
            refused = str(error)
            continue
        if _rows(made.scenario) > max(MAX_ROWS, _rows(original)):  # more rows and a larger group
            refused = f"{_rows(made.scenario)} rows, above {MAX_ROWS}"
            continue
        return made if next_steps is None else _with_edit(made, text, next_steps)
    raise DrawError(f"{original.name}: {ATTEMPTS} draws in a row refused by the format, the last: {refused}")


def smaller(current: Draw, text: str) -> Iterator[Draw]:
    """``current`` with one of its edits undone, each in turn (the seed stays; a group size goes
    with the rows per task drawn for it); a draw the format refuses once an edit is undone is
    passed over."""
    for undone in current.edits:
        if undone[0] == SEED_PATH:
            continue
        gone = {undone[0], ROWS_PATH} if undone[0] == GROUP_PATH else {undone[0]}
        try:
            kept = tuple(edit for edit in current.edits if edit[0] not in gone)
            yield _read(current.original, text, current.index, kept)
        except DrawError:
            continue


def document(draw: Draw, *, source: Path, seed: int) -> str:
    """The draw as a scenario file the user can keep and run, saying where it came from."""
    header = [
        f"# Drawn by --rollout-chaos-fuzz from {source} (run seed {seed}, draw {draw.index}):",
        *(f"#   {line}" for line in draw.describe()),
    ]
    return "\n".join(header) + "\n" + draw.text


class DrawError(ValueError):
    """A draw that cannot be made or that the scenario format refuses."""


def _read(original: Scenario, text: str, index: int, edits: tuple[Edit, ...]) -> Draw:
    document = yaml.safe_load(text)
    document["name"] = f"{original.name}-fuzz-{index}"
    for path, value in edits:
        _set(document, path, value)
    drawn = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    try:
        scenario = parse_scenario(drawn, original.path)
    except ScenarioFileError as refused:  # it lists what the format refuses
        raise DrawError(str(refused)) from refused
    return Draw(original, index, edits, drawn, scenario)


def _more_collections(scenario: Scenario, rng: random.Random) -> Edit | None:
    """Where the scenario runs one collection, now and then two or three on the same collector."""
    if scenario.workload.collections > 1 or rng.random() >= MORE_COLLECTIONS_CHANCE:
        return None
    return (COLLECTIONS_PATH, rng.choice(MORE_COLLECTIONS))


def _with_edit(made: Draw, text: str, edit: Edit) -> Draw:
    """``made`` with ``edit`` last, or ``made`` where the format refuses it."""
    try:
        return _read(made.original, text, made.index, (*made.edits, edit))
    except DrawError:
        return made


def _dimensions(scenario: Scenario, rng: random.Random) -> Iterator[list[Edit]]:
    """The edits a draw may choose from, each a list that goes together."""
    workload = scenario.workload
    tasks = list(workload.tasks)
    others = [task for task in v.TASK_NAMES if task not in tasks]
    per_row = len(tasks) * workload.generations_per_prompt
    most = max(workload.rows_per_task, MAX_ROWS // (per_row * (2 if others else 1)))
    if most > workload.rows_per_task:
        yield [(ROWS_PATH, rng.randint(workload.rows_per_task + 1, most))]
    if others and workload.rows_per_task * (len(tasks) + 1) * workload.generations_per_prompt <= MAX_ROWS:
        extra = rng.choice(others)
        # Where rows are named by id, the new task goes last, so a named row keeps its task.
        orders = [[*tasks, extra], [extra, *tasks]] if _layout_free(scenario) else [[*tasks, extra]]
        yield [("workload.tasks", rng.choice(orders))]
    if workload.generations_per_prompt > 1:
        yield from _group_dimensions(scenario, rng)
    rows = workload.rows_per_task * per_row
    if workload.max_concurrency is None and rows > 1:
        yield [("workload.max_concurrency", rng.randint(1, rows - 1))]
    if _layout_free(scenario):
        yield [("workload.order", _other(rng, v.ROW_ORDERS, workload.order))]
        yield [("workload.row_ids", _other(rng, v.ROW_IDS, workload.row_ids))]
    if not scenario.stack.env_latency_ms_per_call:
        yield [("stack.env_latency_ms_per_call", rng.choice(ENV_LATENCIES_MS))]
    for index, step in enumerate(scenario.faults):
        if step.at.kind == "on_request" and step.at.nth is not None:
            nth = _neighbour(rng, step.at.nth, lowest=1)
            yield [(f"faults.{index}.at", {"on_request": {"server": step.at.server, "nth": nth}})]
        elif step.at.kind == "after_completed" and step.at.completed is not None:
            yield [(f"faults.{index}.at", {"after_completed": _neighbour(rng, step.at.completed, lowest=1)})]


def _group_dimensions(scenario: Scenario, rng: random.Random) -> Iterator[list[Edit]]:
    """Another GRPO group size, with as many rows per task as keep the rows at least as many (so a
    row the scenario names still exists); the members scored apart."""
    workload = scenario.workload
    rows = workload.rows_per_task * workload.generations_per_prompt
    prompts = {size: -(-rows // size) for size in GROUP_SIZES}  # prompts per task, rounded up
    sizes = [
        size
        for size in GROUP_SIZES
        if size != workload.generations_per_prompt
        and prompts[size] * size * len(workload.tasks) <= MAX_ROWS
        and _a_group_trains(scenario, size, groups=prompts[size] * len(workload.tasks))
    ]
    if sizes:
        size = rng.choice(sizes)
        per_task = prompts[size]
        group = [(GROUP_PATH, size)]
        yield group if per_task == workload.rows_per_task else [*group, (ROWS_PATH, per_task)]
    if not scenario.stack.reward_spread:
        yield [("stack.reward_spread", REWARD_SPREAD)]


def _rows(scenario: Scenario) -> int:
    workload = scenario.workload
    return workload.rows_per_task * len(workload.tasks) * workload.generations_per_prompt


def _a_group_trains(scenario: Scenario, size: int, *, groups: int) -> bool:
    """Whether a scenario that expects its rollouts back keeps, at groups of ``size``, a group with
    none of the rows it expects aborted: were every group to hold one, every group would be left
    out of the train batch, and a sound collector must then raise (``no_empty_epoch``)."""
    conditions = scenario.expect.rollouts
    if conditions is None or not conditions.aborted_rows:
        return True
    return len({row // size for row in conditions.aborted_rows}) < groups


def _layout_free(scenario: Scenario) -> bool:
    """Whether rows may be renumbered and reordered: nothing in the scenario names a row by its id."""
    conditions = scenario.expect.rollouts
    if conditions is not None and conditions.aborted_rows is not None:
        return False
    return not any("row" in step.params for step in scenario.faults)


def _other(rng: random.Random, choices: Sequence[str], current: str) -> str:
    return rng.choice([choice for choice in choices if choice != current])


def _neighbour(rng: random.Random, value: int, *, lowest: int) -> int:
    return rng.choice([n for n in range(max(lowest, value - 2), value + 3) if n != value])


def _set(document: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = document
    for part in parents:
        if isinstance(node, list):
            node = node[int(part)]
        else:
            if node.get(part) is None:  # absent, or written empty (``stack:`` alone)
                node[part] = {}
            node = node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


_READERS: Final[dict[str, Callable[[Scenario], Any]]] = {
    ROWS_PATH: lambda s: s.workload.rows_per_task,
    GROUP_PATH: lambda s: s.workload.generations_per_prompt,
    "stack.reward_spread": lambda s: s.stack.reward_spread,
    "workload.tasks": lambda s: list(s.workload.tasks),
    "workload.order": lambda s: s.workload.order,
    "workload.row_ids": lambda s: s.workload.row_ids,
    "workload.max_concurrency": lambda s: s.workload.max_concurrency,
    COLLECTIONS_PATH: lambda s: s.workload.collections,
    "stack.env_latency_ms_per_call": lambda s: s.stack.env_latency_ms_per_call,
    SEED_PATH: lambda s: s.stack.policy.seed,
}


def _get(scenario: Scenario, path: str) -> Any:
    """What ``scenario`` has at ``path``, as the draw's edit line shows it."""
    if path in _READERS:
        return _READERS[path](scenario)
    _, index, _ = path.split(".")
    at = scenario.faults[int(index)].at
    if at.kind == "on_request":
        return {"on_request": {"server": at.server, "nth": at.nth}}
    return {"after_completed": at.completed}
