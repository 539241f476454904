"""``groups_intact``: a GRPO group reaches training whole and sound, or not at all (slime #2078).

GRPO's advantage of a sample is its reward against its group's baseline (the mean, often the
std, of the group's rewards). A failed member kept in its group as a placeholder, reward 0 and
loss mask zeroed, trains on nothing itself but still shifts every sibling's advantage: slime's
per-row isolation after #2078 keeps such a one-element list in its group. So each group of
``generations_per_prompt`` consecutive rows (the workload lays rows out prompt by prompt) must
reach the train batch in one of two ways: every member in it, each a real generation of its row
(completed or truncated, not aborted, and in gym style with a successful ``/run`` in the fault
layer's record: a retry that completed the group counts), or no member in it (the failed member
dropped with its group). Some members in the batch and some out is a group whose baseline holds a
placeholder, or one split across steps; a member that failed but is still in the batch is the
placeholder itself. The other way round, a group whose every member is a real generation and whose
rewards differ, left out whole, is over-dropping: the trainer loses a group with something to
teach, for a failure elsewhere (a group whose rewards are all equal has zero advantage, and leaving
it out is what dynamic sampling does). A raise hands the trainer nothing, which holds: the step
failed. With one generation per prompt there is no group to break: NOT_JUDGED. The train batch is what the
collector says (``Rollout.in_train_batch``), else every rollout not aborted, as
``train_batch_sound`` reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    not_judged,
    rollouts_to_judge,
    story,
    verdict,
)
from pytest_rollout_chaos.invariants.served import Served, served


class GroupsIntact:
    name: ClassVar[str] = "groups_intact"

    def check(self, observation: Observation) -> Verdict:
        size = observation.generations_per_prompt
        if size <= 1:
            return not_judged(self.name, "one generation per prompt: every group has one member")
        rollouts = rollouts_to_judge(
            observation,
            self.name,
            raised="the step raised; no group reached the trainer",
            unfinished=not_judged(self.name, "the collector neither returned nor raised: no train batch"),
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        requested = observation.requested
        if len(requested) % size:
            return verdict(
                self.name,
                Status.UNKNOWN,
                f"{len(requested)} rows do not split into groups of generations_per_prompt={size}",
            )
        by_row = {r.row_index: r for r in rollouts if r is not None}
        record = served(observation.history)
        groups = [requested[start : start + size] for start in range(0, len(requested), size)]
        problems = [p for group in groups if (p := _problem(group, by_row, record)) is not None]
        dropped = [p for group in groups if (p := _over_dropped(group, by_row, record)) is not None]
        whole = sum(1 for group in groups if all(_trained(by_row.get(index)) for index in group))
        if not problems and not dropped:
            return verdict(
                self.name,
                Status.PASS,
                f"{whole} of the {len(groups)} groups of {size} reached the train batch whole, each "
                "member a real generation; the others were left out whole",
            )
        broken = (
            f"{len(problems)} of the {len(groups)} groups of {size} reached training with a failed "
            "member: its placeholder reward enters the group's advantage baseline (or the group is "
            "split across steps)"
        )
        lost = (
            f"{len(dropped)} of the {len(groups)} groups of {size}, every member a real generation "
            "and their rewards different, were left out of the train batch whole"
        )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what="; ".join(text for text, count in ((broken, problems), (lost, dropped)) if count),
                expected=(
                    "a group with a failed member left out of the train batch whole, completed by a "
                    "retry, or the step failed; a sound group whose rewards differ trained"
                ),
            ),
            [*problems, *dropped],
        )


def _trained(rollout: Rollout | None) -> bool:
    """In the train batch: as the collector says, else when it is not aborted."""
    if rollout is None:
        return False
    if rollout.in_train_batch is None:
        return rollout.status != "aborted"
    return rollout.in_train_batch


def _problem(group: Sequence[int], by_row: dict[int, Rollout], record: Served) -> str | None:
    trained = [index for index in group if _trained(by_row.get(index))]
    if not trained:
        return None
    rows = f"group of rows {group[0]}..{group[-1]}"
    failed = [text for index in group if (text := _failure(index, by_row.get(index), record)) is not None]
    left_out = [index for index in group if index not in trained]
    if left_out:
        why = f": {'; '.join(failed)}" if failed else ""
        return (
            f"{rows}: {len(trained)} members in the train batch, rows {left_out} left out{why}; the "
            "group's baseline still counts the missing members' placeholders, or the group is split"
        )
    if failed:
        return f"{rows} is in the train batch whole with a failed member: {'; '.join(failed)}"
    return None


def _over_dropped(group: Sequence[int], by_row: dict[int, Rollout], record: Served) -> str | None:
    """Why a sound group left out whole should have been trained: every member a real generation
    and their rewards different. None otherwise (rewards all equal: zero advantage, which a
    dynamic-sampling filter may leave out)."""
    members = [by_row.get(index) for index in group]
    if any(_trained(member) for member in members):
        return None
    if any(_failure(index, by_row.get(index), record) is not None for index in group):
        return None
    rewards = [member.reward for member in members if member is not None]
    if len(set(rewards)) < 2:
        return None
    shown = ", ".join(f"{reward:g}" for reward in rewards)
    return (
        f"group of rows {group[0]}..{group[-1]} was left out of the train batch whole, though every "
        f"member is a real generation and their rewards differ ({shown}): a group with something to "
        "teach dropped"
    )


def _failure(index: int, rollout: Rollout | None, record: Served) -> str | None:
    """Why the member at ``index`` is no real generation of its row, or None when it is one."""
    if rollout is None:
        return f"row {index} came back as nothing"
    if rollout.status == "aborted":
        reason = f" ({rollout.error})" if rollout.error else ""
        return f"row {index} aborted with reward {rollout.reward}{reason}"
    if record.style == "gym" and not any(call.succeeded for call in record.calls(index)):
        tried = "; ".join(call.describe() for call in record.calls(index)) or "no /run was recorded"
        said = f"row {index} is {rollout.status} with reward {rollout.reward}"
        return f"{said}, but no /run of it succeeded ({tried})"
    return None
