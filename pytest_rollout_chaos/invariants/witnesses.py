"""Witnesses: what must have happened in a run for a scenario without a fault to test anything.

A fault scenario proves it tested something when its faults acted (``engine.acted``). A scenario
whose condition is the stack itself (the model server re-rendering prompts, the policy still
loading, a slow environment) has no fault to act, and on another stack the condition may simply
not happen: real vLLM's model may not drift, a policy may already be up. So such a scenario
names in ``expect.witness`` what must be seen, and how often at least; a witness not seen makes
the run vacuous, never a silent pass.

Each witness counts something in the History, from the servers' side only, never from what the
collector says: the fault layer's record of answers and refused requests (``served``, ``sends``)
and the environment's own record. One function per witness; ``WITNESSES`` is the closed
vocabulary the scenario format accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.sends import spans
from pytest_rollout_chaos.invariants.served import finished, served
from pytest_rollout_chaos.servers.policy.replicas import replica_of

NOT_READY_STATUSES: Final = frozenset({502, 503, 504})
POLICY_LINK_SUFFIX: Final = "->policy"


@dataclass(frozen=True, slots=True)
class Count:
    """How many times a witness was seen, and where (rows, task groups, requests)."""

    seen: int
    where: str = ""


@dataclass(frozen=True, slots=True)
class Witness:
    """One name of the vocabulary: what it counts, and the function that counts it."""

    name: str
    counts: str  # "rows whose prompt ids drifted": read as "at least N <counts>"
    source: str  # where the count comes from, for the docs and the failure story
    count: Callable[[History], Count]


@dataclass(frozen=True, slots=True)
class Sighting:
    """A witness a scenario named, the least count it asked for, and what the run showed."""

    name: str
    least: int
    count: Count
    counts: str
    source: str

    @property
    def seen(self) -> bool:
        return self.count.seen >= self.least

    def describe(self) -> str:
        """``prompt_ids_drifted: seen 3 (at least 1): rows whose ... (rows [0, 2, 5])``."""
        where = f" ({self.count.where})" if self.count.where else ""
        if self.seen:
            return f"{self.name}: seen {self.count.seen} (at least {self.least}): {self.counts}{where}"
        return (
            f"{self.name}: NOT_SEEN: {self.count.seen} {self.counts}{where}, at least {self.least} "
            f"needed ({self.source})"
        )


def prompt_ids_drifted(history: History) -> Count:
    """Rows with a successful ``/run`` answer in which a model call's prompt ids do not start with
    the previous call's prompt + generation ids (the fault layer's ``drifted``)."""
    record = served(history)
    if record.style != "gym":
        return Count(0)
    rows = sorted(
        row for row, calls in record.by_row.items() if any(call.succeeded and call.drifted for call in calls)
    )
    return Count(len(rows), f"rows {rows}" if rows else "")


def rows_answered(history: History) -> Count:
    """Rows the servers answered: a successful ``/run`` answer (gym style), or a successful model
    call tied to the row (native style)."""
    record = served(history)
    rows = sorted(row for row, calls in record.by_row.items() if any(call.succeeded for call in calls))
    return Count(len(rows), f"rows {rows}" if rows else "")


def multi_turn_rows(history: History) -> Count:
    """Rows the servers answered with two model calls or more: a successful ``/run`` answer that
    generated two or more (gym style), or two successful model calls tied to the row (native)."""
    record = served(history)
    if record.style == "gym":
        rows = sorted(
            row
            for row, calls in record.by_row.items()
            if any(call.succeeded and len(call.generations) > 1 for call in calls)
        )
    elif record.style == "native":
        rows = sorted(
            row for row, calls in record.by_row.items() if sum(1 for call in calls if call.succeeded) > 1
        )
    else:
        rows = []
    return Count(len(rows), f"rows {rows}" if rows else "")


def task_groups_stepped(history: History) -> Count:
    """Task groups the environment stepped: distinct tasks in its ``step_batch`` record."""
    tasks: set[str] = set()
    for event in history.events(source="resources", op="step_batch"):
        listed = event.data.get("tasks")
        if isinstance(listed, list):
            tasks.update(str(task) for task in listed)
    return Count(len(tasks), f"task groups {sorted(tasks)}" if tasks else "")


def _into_policy(link: str) -> bool:
    """Whether ``link`` leads to the policy or one of its replicas (``model->policy[1]``)."""
    return replica_of(link)[0].endswith(POLICY_LINK_SUFFIX)


def policy_refused_at_start(history: History) -> Count:
    """Requests to the policy refused (no answer, or HTTP 502/503/504) before its first real answer:
    one or more means the collection's first request found the policy not ready."""
    refused = 0
    for span in spans(history):
        if not _into_policy(span.link) or span.ended is None:
            continue
        if span.outcome == "info" or span.status in NOT_READY_STATUSES:
            refused += 1
            continue
        break
    return Count(refused)


def generations_at_token_limit(history: History) -> Count:
    """Generations the policy stopped at the token limit: ``finish_reason: length`` in the fault
    layer's record of its answers."""
    return Count(sum(1 for _, reason in finished(history) if reason == "length"))


_LAYER: Final = "the fault layer's record of /run answers"
WITNESSES: Final[tuple[Witness, ...]] = (
    Witness(
        "rows_answered",
        "rows the servers answered",
        "the fault layer's record of /run answers, or of the policy's answers in native style",
        rows_answered,
    ),
    Witness("prompt_ids_drifted", "rows whose prompt ids drifted between turns", _LAYER, prompt_ids_drifted),
    Witness(
        "multi_turn_rows",
        "rows the servers answered with two model calls or more",
        "the fault layer's record of /run answers, or of the policy's answers in native style",
        multi_turn_rows,
    ),
    Witness(
        "task_groups_stepped",
        "task groups the environment stepped",
        "the environment's step_batch record (native style)",
        task_groups_stepped,
    ),
    Witness(
        "policy_refused_at_start",
        "requests the policy refused before it first answered",
        "the fault layer's record of requests to the policy",
        policy_refused_at_start,
    ),
    Witness(
        "generations_at_token_limit",
        "generations the policy stopped at the token limit",
        "the fault layer's record of the policy's answers (finish_reason: length)",
        generations_at_token_limit,
    ),
)
BY_NAME: Final[dict[str, Witness]] = {witness.name: witness for witness in WITNESSES}
NAMES: Final = tuple(BY_NAME)


def look(history: History, wanted: Mapping[str, int]) -> list[Sighting]:
    """Each witness ``wanted`` names (name -> least count), counted in ``history``."""
    found = []
    for name, least in wanted.items():
        witness = BY_NAME[name]
        found.append(Sighting(name, least, witness.count(history), witness.counts, witness.source))
    return found
