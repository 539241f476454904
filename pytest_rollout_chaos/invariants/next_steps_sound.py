"""``next_steps_sound``: the steps after a faulted one, on a healed stack, come back whole.

A trainer keeps its collector (its Gym client, its semaphore, its caches) from one step to the
next, so what a failed step leaves behind in it fails steps that meet no fault: a concurrency
permit never given back after a row failed (the next step waits for permits nobody returns), a
client closed on an error and never reopened, a cache of dead agents' addresses, the last step's
rows handed on. With ``workload.collections`` above 1 the engine calls ``collect`` again on the
same collector once the first collection has ended and every fault is healed, each time with a
fresh copy of the same rows (``base.FollowUp``). Each must raise nothing, end within the
scenario's deadline, and hand back one rollout per row, none aborted or missing: the stack is
healthy again, so a healthy step is healthy (``truncated``, the token limit, is a healthy end).
NOT_JUDGED where the scenario runs one collection: never a PASS over nothing. The other
invariants judge the first collection alone.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar, Final

from pytest_rollout_chaos.collector.protocol import row_index
from pytest_rollout_chaos.invariants.base import (
    FollowUp,
    Observation,
    Status,
    Verdict,
    not_judged,
    story,
    verdict,
)

HEALTHY: Final = ("completed", "truncated")
MESSAGE_CHARS: Final = 300  # of a raise's message in the evidence


class NextStepsSound:
    name: ClassVar[str] = "next_steps_sound"

    def check(self, observation: Observation) -> Verdict:
        follow_ups = observation.follow_ups
        if not follow_ups:
            return not_judged(
                self.name, "the scenario runs one collection (workload.collections: 1): no next step to judge"
            )
        evidence = [line for follow_up in follow_ups for line in problems(follow_up)]
        broken = sorted({follow_up.number for follow_up in follow_ups if problems(follow_up)})
        numbers = ", ".join(str(follow_up.number) for follow_up in follow_ups)
        if not broken:
            return verdict(
                self.name,
                Status.PASS,
                f"collections {numbers} on the same collector, after every fault was healed, each "
                f"returned one healthy rollout for each of their {len(follow_ups[0].rows)} rows",
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"the collector's next steps broke on a healed stack: collection(s) "
                    f"{', '.join(map(str, broken))} of {follow_ups[-1].number}, run on the same collector "
                    "after the first ended and every fault was healed, did not come back whole (the first "
                    "collection's outcome below); a failed step left something behind in the collector"
                ),
                expected=(
                    "each later collection raises nothing, ends within the deadline and returns one "
                    "completed (or truncated) rollout per row, as on a stack that never failed"
                ),
            ),
            evidence,
        )


def problems(follow_up: FollowUp) -> list[str]:
    """What is wrong with one follow-up, one line each; empty when it came back whole."""
    where = f"collection {follow_up.number}"
    if follow_up.timed_out:
        return [
            f"{where}: did not finish within {follow_up.deadline_s:g}s and was cancelled "
            f"({len(follow_up.rows)} rows requested)"
        ]
    if follow_up.raised is not None:
        message = " ".join(str(follow_up.raised).split())[:MESSAGE_CHARS]
        name = type(follow_up.raised).__name__
        return [f"{where}: raised {name}: {message}" if message else f"{where}: raised a bare {name}"]
    if follow_up.rollouts is None:
        return [f"{where}: neither returned nor raised"]
    requested = [row_index(row, position) for position, row in enumerate(follow_up.rows)]
    returned = [rollout for rollout in follow_up.rollouts if rollout is not None]
    counts = Counter(rollout.row_index for rollout in returned)
    lines = []
    holes = len(follow_up.rollouts) - len(returned)
    if holes:
        lines.append(f"{where}: {holes} entries of the returned list are None")
    missing = sorted(set(requested) - set(counts))
    if missing:
        lines.append(f"{where}: no rollout for rows {missing}")
    doubled = sorted(index for index, count in counts.items() if count > 1)
    if doubled:
        lines.append(f"{where}: more than one rollout for rows {doubled}")
    unknown = sorted(set(counts) - set(requested))
    if unknown:
        lines.append(f"{where}: rollouts for rows never requested: {unknown}")
    for rollout in returned:
        if rollout.status not in HEALTHY:
            lines.append(f"{where}: row {rollout.row_index} came back {rollout.status}: {rollout.error}")
    return lines
