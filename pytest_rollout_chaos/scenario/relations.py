"""Rules that relate one part of a scenario file to another, checked in the same pass as the fields.

The workload fixes the rows and the stack the servers (``shape.Shape``). A fault's target,
``row``, ``nth`` and trigger, and the counts of ``expect.rollouts``, must fit those, and
``expect`` must not contradict itself: such a scenario could pass only by never testing what it
says. For the same reason a scenario with no fault step names a witness (``expect.witness``: what
must have happened for it to test anything), each witness must be one the workload can show, and
``expect.not_judged`` names only invariants the scenario lists (an unlisted one that finds nothing
to judge is already silent), and ``next_steps_sound`` is listed only with ``workload.collections``
above 1, whose next steps need every server back after the heal (no ``restart_on_heal: false``).

The rules read whatever of the file could be read (``mappings.Parsed`` leaves out the keys that
were wrong), so one ``rollout-chaos validate`` shows every problem. A rule whose inputs are
themselves wrong is skipped: those keys already carry their own problem.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pytest_rollout_chaos.scenario import mappings as m
from pytest_rollout_chaos.scenario import params as p
from pytest_rollout_chaos.scenario import spec as s
from pytest_rollout_chaos.scenario import vocabulary as v
from pytest_rollout_chaos.scenario.shape import DEFAULT_LAYOUT, TASK_OF_AGENT, Shape
from pytest_rollout_chaos.scenario.steps import ParsedTrigger

RUN_ROUTE: Final = "/run"
# Targets that are not servers of ``stack.servers``: nothing has to be started for them.
_NOT_STARTED: Final = (v.COLLECTOR, v.GYM_CLIENT)
NEXT_STEPS: Final = "next_steps_sound"
RETRY_HINT: Final = "; to aim at a retry, give the fault a row: nth then counts that row's attempts"
# Witnesses that count rows, and those a workload style can never show (with why).
_ROW_WITNESSES: Final = ("rows_answered", "prompt_ids_drifted", "multi_turn_rows")
_NEVER_IN_STYLE: Final = {
    "prompt_ids_drifted": ("native", "drift is read from /run answers, and native style sends none"),
    "task_groups_stepped": ("gym", "the agents step the environment per row; only native style batches it"),
}


def check(scenario: m.Parsed, problems: s.Problems, *, policy_replicas: int = 1) -> None:
    """Record every problem between the parts of ``scenario`` that could be read; ``policy[i]``
    targets against the replicas it asks for, else the run's ``policy_replicas``."""
    rules = _Rules(Shape.of(scenario, policy_replicas=policy_replicas), problems)
    for index, step in enumerate(scenario.part("faults") or ()):
        if isinstance(step, m.Parsed):
            rules.step(step, f"faults[{index}]")
    expect = scenario.part("expect")
    if isinstance(expect, m.Parsed):
        rules.expect(expect)
        faults = scenario.part("faults")
        if faults is not None and not faults and "witness" not in expect.lines:
            problems.add(
                scenario.lines.get("expect", expect.line),
                "expect.witness",
                "a scenario with no fault step must name what has to happen for it to test anything "
                f"(valid: {', '.join(v.WITNESSES)}; e.g. witness: {{multi_turn_rows: 1}})",
            )


@dataclasses.dataclass(frozen=True, slots=True)
class _Rules:
    shape: Shape
    problems: s.Problems

    def step(self, step: m.Parsed, field: str) -> None:
        kind = step.values.get("kind")
        target = step.values.get("target")
        params: Mapping[str, Any] = step.values.get("params", {})
        lines = step.lines
        if isinstance(target, str):
            for end in target.split("->"):
                self.server(end, lines.get("target", step.line), f"{field}.target")
        trigger = step.part("at")
        if isinstance(trigger, ParsedTrigger):
            self.trigger(trigger, f"{field}.at")
        row = params.get("row")
        if isinstance(row, int) and self.shape.layout != DEFAULT_LAYOUT:
            self.problems.add(
                lines["row"],
                f"{field}.row",
                f"a fault on one row needs the default row layout (workload.row_ids: positions, order: "
                f"by_task), not {self.shape.layout[0]}/{self.shape.layout[1]}: aim it at every row "
                "(leave row out) or at a server",
            )
        elif isinstance(row, int):  # with a wrong target, at least whether the row exists
            self.row(target if isinstance(target, str) else "", row, _At(lines["row"], f"{field}.row"))
        if params.get("restart_on_heal") is False and (self.shape.collections or 1) > 1:
            self.problems.add(
                lines["restart_on_heal"],
                f"{field}.restart_on_heal",
                "false leaves the server down after the heal, and workload.collections runs the next "
                "steps on a healed stack: they would judge the missing server, not the collector "
                "(leave restart_on_heal out, or workload.collections at 1)",
            )
        if not isinstance(target, str):
            return
        nth = params.get("nth")
        route = params.get("route") if "route" in lines else (p.default_route(kind) if kind else None)
        # With ``row`` set, nth counts that row's attempts, which retries decide.
        if isinstance(nth, int) and route == RUN_ROUTE and "row" not in lines:
            self.runs(target, nth, _At(lines["nth"], f"{field}.nth"), fault=True)
        count = params.get("count")
        total = self.shape.total
        if kind == "short_results" and isinstance(count, int) and total is not None and count > total:
            self.problems.add(
                lines["count"],
                f"{field}.count",
                f"{count} exceeds the workload's {total} rows: no more results than rows can go "
                f"missing {self.shape.valid(1, total)}",
            )

    def trigger(self, trigger: ParsedTrigger, field: str) -> None:
        shape = self.shape
        total = shape.total
        if trigger.kind == "after_completed" and isinstance(trigger.value, int):
            if total is not None and trigger.value > total:
                self.problems.add(
                    trigger.line,
                    f"{field}.after_completed",
                    f"{trigger.value} exceeds the workload's {total} rows, so it would never fire "
                    f"{shape.valid(1, total)}",
                )
        elif trigger.kind == "on_request" and isinstance(trigger.value, m.Parsed):
            request = trigger.value
            server = request.values.get("server")
            if not isinstance(server, str):
                return
            line = request.lines.get("server", trigger.line)
            nth = request.values.get("nth")
            if self.server(server, line, f"{field}.on_request.server") and isinstance(nth, int):
                self.runs(
                    server, nth, _At(request.lines.get("nth", line), f"{field}.on_request.nth"), fault=False
                )

    def server(self, name: str, line: int, field: str) -> bool:
        """``name`` must be started by the stack; an agent instance must also serve a task of the
        workload; a policy replica ``policy[i]`` must be one the scenario runs."""
        if name in _NOT_STARTED:
            return True
        shape = self.shape
        name, index = v.replica_of(name)
        if index is not None and shape.replicas is not None and index >= shape.replicas:
            valid = ", ".join((v.POLICY, *v.replica_names(shape.replicas)))
            self.problems.add(
                line,
                field,
                f"'policy[{index}]' is not a replica the stack runs: it runs {shape.replicas} policy "
                f"replica(s) (--rollout-chaos-policy-replicas, or stack.policy.replicas) (valid: {valid})",
            )
            return False
        server = "agent" if name in TASK_OF_AGENT else name
        if shape.servers is not None and server not in shape.servers:
            valid = ", ".join(shape.servers)
            self.problems.add(line, field, f"{name!r} is not in stack.servers (valid: {valid})")
            return False
        if name in TASK_OF_AGENT and shape.tasks is not None and TASK_OF_AGENT[name] not in shape.tasks:
            self.problems.add(line, field, f"no task of the workload uses {name!r}")
            return False
        return True

    def row(self, target: str, row: int, at: _At) -> None:
        shape = self.shape
        total = shape.total
        rows = shape.rows_of(target)
        if total is None or rows is None or not rows:
            return  # an unused agent instance is the target's own problem
        if row >= total:
            self.problems.add(
                at.line,
                at.field,
                f"row {row} does not exist: the workload has {total} rows {shape.valid(0, total - 1)}",
            )
        elif row not in rows:
            self.problems.add(
                at.line,
                at.field,
                f"row {row} is a {shape.task_of(row)} row, so {target} never receives it "
                f"(valid: {rows.start}..{rows.stop - 1}, the {TASK_OF_AGENT[target]} rows)",
            )

    def runs(self, server: str, nth: int, at: _At, *, fault: bool) -> None:
        """``nth`` of ``/run`` requests to an agent: by a fault on it, or by an ``on_request`` trigger."""
        runs = self.shape.runs_per_fault(server) if fault else self.shape.runs_to(server)
        if runs is None or nth <= runs:
            return
        if runs == 0:
            self.problems.add(
                at.line,
                at.field,
                f"the workload sends no /run request to {server!r}: style native collects without "
                "agents, so this never fires",
            )
            return
        receiver = "each agent instance" if fault and server == "agent" else repr(server)
        self.problems.add(
            at.line,
            at.field,
            f"{nth} exceeds the {runs} /run requests the workload sends to {receiver} (one per row), "
            f"so it would fire only on a retry (valid: 1..{runs}{RETRY_HINT if fault else ''})",
        )

    def expect(self, expect: m.Parsed) -> None:
        lines = expect.lines
        if "raises" in lines and "rollouts" in lines:
            (first, first_line), (second, second_line) = sorted(
                (("raises", lines["raises"]), ("rollouts", lines["rollouts"])), key=lambda item: item[1]
            )
            self.problems.add(
                second_line,
                f"expect.{second}",
                f"give either raises or rollouts, not both (expect.{first} is on line {first_line}): "
                "raises says the collector must fail, rollouts that it must return",
            )
        rollouts = expect.part("rollouts")
        if isinstance(rollouts, m.Parsed):
            self.counts(rollouts)
            self.conditions(rollouts)
        not_judged = expect.part("not_judged")
        listed = expect.values.get("invariants")
        if listed is not None and NEXT_STEPS in listed and self.shape.collections == 1:
            self.problems.add(
                lines.get("invariants", expect.line),
                "expect.invariants",
                f"{NEXT_STEPS} judges the collections after the first, and workload.collections is 1, so "
                "it would judge nothing: set workload.collections (valid: 2..4), or leave it out",
            )
        if isinstance(not_judged, m.Parsed) and listed is not None:
            self.not_judged(not_judged, listed, lines.get("invariants", expect.line))
        witness = expect.part("witness")
        if isinstance(witness, m.Parsed):
            self.witnesses(witness)

    def not_judged(self, not_judged: m.Parsed, listed: Sequence[str], listed_line: int) -> None:
        """``expect.not_judged`` excuses only invariants the scenario lists."""
        for name in not_judged.values:
            if name not in listed:
                self.problems.add(
                    not_judged.lines[name],
                    f"expect.not_judged.{name}",
                    f"{name} is not in expect.invariants (line {listed_line}): an invariant the scenario "
                    "does not list is not judged silently already; list it, or remove it here",
                )

    def witnesses(self, witness: m.Parsed) -> None:
        """Each witness must be one the workload can show, as often as asked."""
        shape = self.shape
        total = shape.total
        for name, least in witness.values.items():
            at = _At(witness.lines[name], f"expect.witness.{name}")
            if name in _ROW_WITNESSES and total is not None and least > total:
                self.problems.add(
                    at.line, at.field, f"{least} exceeds the workload's {total} rows {shape.valid(1, total)}"
                )
            never = _NEVER_IN_STYLE.get(name)
            if never is not None and shape.style == never[0]:
                self.problems.add(at.line, at.field, f"never seen in {never[0]} style: {never[1]}")
            if name == "task_groups_stepped" and shape.tasks is not None and least > len(shape.tasks):
                self.problems.add(
                    at.line,
                    at.field,
                    f"{least} exceeds the workload's {len(shape.tasks)} task groups "
                    f"(valid: 1..{len(shape.tasks)}; workload.tasks)",
                )

    def counts(self, rollouts: m.Parsed) -> None:
        """Counts and rows of ``expect.rollouts`` against the workload."""
        shape = self.shape
        total = shape.total
        if total is None:
            return
        for key in ("aborted_max", "min_completed"):
            value = rollouts.values.get(key)
            if isinstance(value, int) and value > total:
                self.problems.add(
                    rollouts.lines[key],
                    f"expect.rollouts.{key}",
                    f"{value} exceeds the workload's {total} rows {shape.valid(0, total)}",
                )
        for index, row in enumerate(rollouts.part("aborted_rows") or ()):
            if isinstance(row, int) and row >= total:
                self.problems.add(
                    rollouts.lines["aborted_rows"],
                    f"expect.rollouts.aborted_rows[{index}]",
                    f"row {row} does not exist: the workload has {total} rows {shape.valid(0, total - 1)}",
                )

    def conditions(self, rollouts: m.Parsed) -> None:
        """Conditions of ``expect.rollouts`` that no outcome can meet together."""
        lines = rollouts.lines
        values = rollouts.values
        aborted_rows = values.get("aborted_rows")
        if aborted_rows is None:
            return
        if values.get("all_completed") and aborted_rows:
            self.problems.add(
                lines["aborted_rows"],
                "expect.rollouts.aborted_rows",
                f"rows {aborted_rows} cannot end aborted when all_completed is true (line "
                f"{lines['all_completed']}); keep one of the two",
            )
        aborted_max = values.get("aborted_max")
        if isinstance(aborted_max, int) and aborted_max < len(aborted_rows):
            self.problems.add(
                lines["aborted_max"],
                "expect.rollouts.aborted_max",
                f"{aborted_max} is below the {len(aborted_rows)} rows that aborted_rows (line "
                f"{lines['aborted_rows']}) says end aborted (valid: >= {len(aborted_rows)})",
            )
        total = self.shape.total
        min_completed = values.get("min_completed")
        if total is not None and isinstance(min_completed, int) and min_completed <= total:
            room = total - len([row for row in aborted_rows if row < total])
            if min_completed > room:
                self.problems.add(
                    lines["min_completed"],
                    "expect.rollouts.min_completed",
                    f"{min_completed} cannot be met: aborted_rows (line {lines['aborted_rows']}) "
                    f"leaves {room} of the workload's {total} rows to complete (valid: 0..{room})",
                )


@dataclasses.dataclass(frozen=True, slots=True)
class _At:
    """Where a problem is reported: the line of the key and its field path."""

    line: int
    field: str
