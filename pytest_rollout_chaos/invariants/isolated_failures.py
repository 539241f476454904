"""``isolated_failures``: one bad trajectory never takes down its siblings (slime #2078).

Which trajectories went bad is read from the servers' own ``fail`` events and from what the
faults actually touched: the fault layer's ``hook`` record of each request of a row that a
trajectory fault's rule hit (what ``engine.acted`` counts), never from the collector's claims
and never from an ``inject`` that merely names a row: a fault whose rule hit nothing of that
row (the row finished first, or never reached that server) made no victim. Raising is allowed
when the failure was not one trajectory's: an infrastructure fault, a process exit, or more
failed rows than the configured aborted bound.
"""

from __future__ import annotations

from typing import ClassVar, Final

from pytest_rollout_chaos.history import Event
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    describe,
    not_judged,
    story,
    verdict,
)

TRAJECTORY_FAULTS: Final = frozenset(
    {"trajectory_exception", "http_error", "nan_logprobs", "prefix_drift", "malformed_json", "hang"}
)
SERVER_SOURCES: Final = frozenset({"agent", "model", "resources", "policy"})


def failed_rows(events: list[Event]) -> set[int]:
    """Rows a server failed, and rows whose request a trajectory fault's rule hit and changed."""
    rows: set[int] = set()
    for event in events:
        if event.source in SERVER_SOURCES and event.kind == "fail" and isinstance(event.data.get("row"), int):
            rows.add(event.data["row"])
        if touched_row(event):
            rows.add(event.data["row"])
    return rows


def touched_row(event: Event) -> bool:
    """A fault-layer ``hook``: a trajectory fault's rule fired on a request of a known row and did
    its damage (a rewrite that changed nothing, or was skipped, touched nothing)."""
    data = event.data
    return (
        event.op == "hook"
        and "link" in data
        and data.get("effect") in TRAJECTORY_FAULTS
        and isinstance(data.get("row"), int)
        and not isinstance(data.get("row"), bool)
        and "skipped" not in data
        and data.get("changed") != 0
    )


def infrastructure_events(events: list[Event]) -> list[Event]:
    return [
        event
        for event in events
        if event.source == "process"
        or (
            event.source == "fault"
            and event.op == "inject"
            and event.data.get("fault") not in TRAJECTORY_FAULTS
        )
    ]


class IsolatedFailures:
    name: ClassVar[str] = "isolated_failures"

    def check(self, observation: Observation) -> Verdict:
        history = observation.history
        events = history.events()
        bad = failed_rows(events) & set(observation.requested)
        infra = infrastructure_events(events)
        if not bad:
            return not_judged(
                self.name, "no trajectory failed on a server, so there was no failure to isolate"
            )
        siblings = sorted(set(observation.requested) - bad)
        evidence = describe([event for event in events if event.data.get("row") in bad][-8:], history)
        if observation.raised is not None:
            if infra:
                return verdict(
                    self.name,
                    Status.PASS,
                    "the collection failed under an infrastructure fault, which is allowed",
                )
            share = len(bad) / max(1, len(observation.rows))
            if share > observation.max_aborted_fraction:
                return verdict(
                    self.name,
                    Status.PASS,
                    f"{len(bad)} of {len(observation.rows)} trajectories failed, above the aborted bound "
                    f"{observation.max_aborted_fraction}; failing the collection is allowed",
                )
            return verdict(
                self.name,
                Status.FAIL,
                story(
                    observation,
                    what=(
                        f"gather without isolation: {len(bad)} trajectory(ies) failed (rows {sorted(bad)}) "
                        f"and took the whole collection down, losing {len(siblings)} healthy siblings "
                        f"{siblings}"
                    ),
                    expected="the failed rows aborted with their root cause and every sibling returned",
                ),
                evidence,
            )
        if observation.rollouts is None:
            return verdict(self.name, Status.UNKNOWN, "the collector neither returned nor raised")
        by_row = {rollout.row_index: rollout for rollout in observation.rollouts if rollout is not None}
        hurt = [row for row in siblings if row not in by_row or by_row[row].status == "aborted"]
        if hurt and not infra:
            details = [
                f"sibling row {row}: " + ("missing" if row not in by_row else f"aborted: {by_row[row].error}")
                for row in hurt
            ]
            return verdict(
                self.name,
                Status.FAIL,
                story(
                    observation,
                    what=f"rows {sorted(bad)} failed and siblings {hurt} were lost or aborted with them",
                    expected="only the failed rows aborted; every healthy sibling completed",
                ),
                details + evidence,
            )
        return verdict(
            self.name,
            Status.PASS,
            f"rows {sorted(bad)} failed on a server and their {len(siblings)} siblings were unaffected",
        )
