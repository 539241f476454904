"""``attempts_bounded``: no row is tried more often than allowed, and ``attempts`` says how often.

A retry loop that ignores its limit (NeMo RL's NaN loop re-running rows until they come back
clean) turns one poisoned row into a retry storm, and a wrong ``attempts`` hides it. Judged per
row: the rollout's ``attempts`` is at most ``max_attempts`` (``CollectorSettings
.max_logprob_attempts``), and in gym style the ``/run`` answers the servers gave for that row
(the fault layer's record; a request cut before any answer does not count, since NeMo Gym's
transport resends those by itself) are at most ``attempts``, and at most ``max_attempts`` also
when the collector raised. In native style the same holds per turn: the model calls the policy
answered for one turn of a row (the collector's own calls, placed by row and by the assistant
messages they carry, as ``retry_faithful`` places them) are that turn's attempts. Whether a
completed row was answered at all is ``corroborated``'s. With no rollout handed back and no
answer on record, there is nothing to count: NOT_JUDGED.
"""

from __future__ import annotations

from typing import ClassVar

from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    not_judged,
    rollouts_to_judge,
    story,
    verdict,
)
from pytest_rollout_chaos.invariants.sends import collector_sends, spans, turn_of
from pytest_rollout_chaos.invariants.served import MODEL_CALL_OPS, Served, served


class AttemptsBounded:
    name: ClassVar[str] = "attempts_bounded"

    def check(self, observation: Observation) -> Verdict:
        limit = observation.max_attempts
        if limit is None:
            return verdict(self.name, Status.UNKNOWN, "the collector's retry limit (max_attempts) is unknown")
        rollouts = rollouts_to_judge(observation, self.name, raised=None)  # a raise still made attempts
        if isinstance(rollouts, Verdict):
            return rollouts
        record = served(observation.history)
        if record.style == "gym":
            answered, what = _answered(record), "/run requests for it"
        else:
            answered, what = _answered_per_turn(observation), "model calls for one of its turns"
        handed = [rollout for rollout in rollouts if rollout is not None]
        if not handed and not answered:
            return not_judged(
                self.name,
                "nothing to count: no rollout came back and the record holds no answered /run "
                "or model call of a row",
            )
        problems = [
            f"row {row}: the servers answered {count} {what}, above max_attempts={limit}"
            for row, count in sorted(answered.items())
            if count > limit
        ]
        for rollout in handed:
            row, attempts = rollout.row_index, rollout.attempts
            if attempts > limit:
                problems.append(f"row {row}: attempts={attempts}, above max_attempts={limit}")
            elif attempts < 1:
                problems.append(f"row {row}: attempts={attempts}; every rollout was tried at least once")
            elif answered.get(row, 0) > attempts:
                problems.append(
                    f"row {row}: attempts={attempts}, but the servers answered {answered[row]} {what}"
                )
        if not problems:
            tried = ""
            if answered and record.style == "gym":
                tried = f"; the servers answered {sum(answered.values())} /run requests"
            elif answered:
                tried = f"; the policy answered at most {max(answered.values())} model calls for a row's turn"
            summary = f"every row was tried at most max_attempts={limit} times{tried}"
            return verdict(self.name, Status.PASS, summary)
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=f"{len(problems)} rows were retried past the limit or miscounted their attempts",
                expected=(
                    f"at most max_attempts={limit} tries per row, each counted in the rollout's attempts, "
                    "then the row aborted with the reason"
                ),
            ),
            problems,
        )


def _answered(record: Served) -> dict[int, int]:
    """``/run`` requests per row that a server answered (with any HTTP status)."""
    return {
        row: count
        for row, calls in record.by_row.items()
        if (count := sum(1 for call in calls if call.status is not None))
    }


def _answered_per_turn(observation: Observation) -> dict[int, int]:
    """Per row, the most model calls the policy answered for one of its turns (native style)."""
    calls = [span for span in spans(observation.history) if span.op in MODEL_CALL_OPS]
    per_turn: dict[tuple[int, int], int] = {}
    for span in collector_sends(calls):
        placed = turn_of(span)
        if placed is None or not span.answered:
            continue  # a call that cannot be placed in a row's turn, or that no server answered
        per_turn[placed] = per_turn.get(placed, 0) + 1
    most: dict[int, int] = {}
    for (row, _), count in per_turn.items():
        most[row] = max(most.get(row, 0), count)
    return most
