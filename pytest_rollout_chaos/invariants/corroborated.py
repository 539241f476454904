"""``corroborated``: a rollout handed back as completed (or truncated) happened on the servers.

Jepsen's checkers hold a client's claims against what the servers saw; here the claim is a
rollout's status. It needs at least one turn, and that row's successful ``/run`` (gym style) or
model call (native style) in the fault layer's record (``served``): a row whose every ``/run``
failed, reported as completed with a placeholder turn, is training data nobody generated.
With no such claim, or no record to hold it against, nothing is judged (NOT_JUDGED).
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
from pytest_rollout_chaos.invariants.served import served


class Corroborated:
    name: ClassVar[str] = "corroborated"

    def check(self, observation: Observation) -> Verdict:
        rollouts = rollouts_to_judge(
            observation, self.name, raised="the collector raised; it claimed no rollout"
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        claimed = [r for r in rollouts if r is not None and r.status != "aborted"]
        if not claimed:
            return not_judged(self.name, "no rollout claims to have completed: every one came back aborted")
        record = served(observation.history)
        if record.style is None:
            return not_judged(
                self.name,
                f"{len(claimed)} rollouts claim to have run, but the History holds no server-side record "
                "of /run or model calls (no fault layer in front of the servers?), so none can be "
                "corroborated",
            )
        problems = []
        for rollout in claimed:
            row, calls = rollout.row_index, record.calls(rollout.row_index)
            claim = f"row {row}: the collector says {rollout.status} with {_turns(len(rollout.turns))}"
            if not rollout.turns:
                problems.append(f"{claim}; a rollout to train on needs at least one generated turn")
            elif not any(call.succeeded for call in calls) and not (
                record.style == "native" and any(call.succeeded for call in record.untied)
            ):
                seen = "; ".join(call.describe() for call in calls) or "no request for that row at all"
                problems.append(
                    f"{claim}, but the servers saw no successful {record.what} for row {row}: {seen}"
                )
        if not problems:
            return verdict(
                self.name,
                Status.PASS,
                f"every one of {len(claimed)} completed or truncated rollouts has turns and a successful "
                f"{record.what} for its row",
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=f"{len(problems)} rollouts claim a result the servers never produced",
                expected=(
                    f"a row whose {record.what} failed handed back aborted with the cause, never "
                    "completed; a completed rollout carries the turns its row generated"
                ),
            ),
            problems,
        )


def _turns(count: int) -> str:
    return f"{count} turn" if count == 1 else f"{count} turns"
