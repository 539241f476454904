"""What a scenario's workload and stack fix, for the rules between its parts (``relations``) and
the drawn scenarios (``strategies``).

The workload fixes the rows: ``len(tasks) x rows_per_task x generations_per_prompt`` of them,
task by task, with ``_rowidx`` 0..N-1 (as ``engine.workload.build_rows`` makes them). The stack
fixes which servers run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pytest_rollout_chaos.scenario import mappings as m
from pytest_rollout_chaos.scenario import tables
from pytest_rollout_chaos.scenario import vocabulary as v

TASK_OF_AGENT: Final = dict(zip(v.AGENT_INSTANCES, v.TASK_NAMES, strict=True))
DEFAULT_LAYOUT: Final = ("positions", "by_task")


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """What the workload and the stack fix; ``None`` where the file leaves it unknown."""

    tasks: tuple[str, ...] | None
    rows_per_task: int | None
    generations_per_prompt: int | None
    style: str | None
    servers: tuple[str, ...] | None
    replicas: int | None = 1  # the policy replicas the scenario runs with
    layout: tuple[str, str] = ("positions", "by_task")  # workload.row_ids and workload.order
    collections: int | None = 1  # workload.collections; None where it is wrong

    @classmethod
    def of(cls, scenario: m.Parsed, *, policy_replicas: int = 1) -> Shape:
        """The shape of a (possibly partly wrong) scenario file; absent sections take their defaults,
        the policy's replicas the run's (``policy_replicas``)."""
        workload = _known_values(scenario, "workload", tables.WORKLOAD)
        stack = _known_values(scenario, "stack", tables.STACK)
        tasks = workload.get("tasks")
        servers = stack.get("servers")
        return cls(
            tasks=tuple(tasks) if tasks is not None else None,
            rows_per_task=workload.get("rows_per_task"),
            generations_per_prompt=workload.get("generations_per_prompt"),
            style=workload.get("style"),
            servers=tuple(servers) if servers is not None else None,
            replicas=_replicas(stack, policy_replicas),
            layout=(workload.get("row_ids") or "positions", workload.get("order") or "by_task"),
            collections=workload.get("collections"),
        )

    @classmethod
    def for_rows(cls, total: int, tasks: Sequence[str]) -> Shape:
        """A gym-style workload of ``total`` rows spread evenly over ``tasks``, every server started."""
        if not tasks or total % len(tasks):
            raise ValueError(f"{total} rows cannot be spread evenly over the tasks {list(tasks)}")
        return cls(tuple(tasks), total // len(tasks), 1, "gym", v.SERVERS)

    @property
    def total(self) -> int | None:
        """The rows requested (and rollouts owed)."""
        if self.tasks is None or self.rows_per_task is None or self.generations_per_prompt is None:
            return None
        return len(self.tasks) * self.rows_per_task * self.generations_per_prompt

    def valid(self, low: int, high: int) -> str:
        """``(valid: 0..3; rows = tasks x rows_per_task x generations_per_prompt = 1 x 4 x 1)``."""
        sizes = f"{len(self.tasks or ())} x {self.rows_per_task} x {self.generations_per_prompt}"
        return f"(valid: {low}..{high}; rows = tasks x rows_per_task x generations_per_prompt = {sizes})"

    def rows_of(self, target: str) -> range | None:
        """The ``_rowidx`` values requests to ``target`` can carry: an agent instance gets its task's."""
        total = self.total
        if total is None:
            return None
        if target not in TASK_OF_AGENT:
            return range(total)
        if self.tasks is None:
            return None
        task = TASK_OF_AGENT[target]
        if task not in self.tasks:
            return range(0)
        block = total // len(self.tasks)
        start = self.tasks.index(task) * block
        return range(start, start + block)

    def task_of(self, row: int) -> str | None:
        """The task whose rows include ``row``."""
        total = self.total
        if total is None or self.tasks is None or not 0 <= row < total:
            return None
        return self.tasks[row // (total // len(self.tasks))]

    def runs_to(self, server: str) -> int | None:
        """``/run`` requests the collector sends ``server`` when nothing is retried: one per row it
        serves, none in native style; ``None`` for a server that is not an agent, or when unknown."""
        if server != "agent" and server not in TASK_OF_AGENT:
            return None
        if self.style is None:
            return None
        if self.style != "gym":
            return 0
        rows = self.rows_of(server)
        return None if rows is None else len(rows)

    def runs_per_fault(self, target: str) -> int | None:
        """``runs_to`` as a fault's ``nth`` counts them: a fault on ``agent`` is armed on every agent
        instance, and each instance counts only its own requests."""
        if target != "agent" or self.tasks is None:
            return self.runs_to(target)
        counts = [self.runs_to(agent) for agent, task in TASK_OF_AGENT.items() if task in self.tasks]
        return None if None in counts else max((count or 0 for count in counts), default=0)


def _replicas(stack: Mapping[str, Any], policy_replicas: int) -> int | None:
    """The scenario's own ``stack.policy.replicas``, else the run's; None where it is unreadable."""
    if "policy" not in stack:
        return None  # a stack section with problems
    policy = stack["policy"]
    if policy is None:
        return policy_replicas
    if not isinstance(policy, m.Parsed) or "replicas" in policy.bad:
        return None
    replicas = policy.values.get("replicas")
    return policy_replicas if replicas is None else int(replicas)


def _known_values(scenario: m.Parsed, key: str, table: m.Section) -> Mapping[str, Any]:
    value = scenario.part(key)
    if isinstance(value, m.Parsed):
        return value.values
    if scenario.known(key):  # not written: every key takes its default
        return {field.name: field.default for field in table.fields}
    return {}
