"""``rewards_recorded``: a rollout's reward is the reward its own row's ``/run`` answered with.

The trainer's advantage is computed from the reward, so a reward taken from another row (results
matched to rows in completion order), another attempt, or a default when a field was missing
trains the policy toward the wrong trajectory. Judged in gym style, where the reward is the
agent's, on every completed (or truncated) rollout: its reward must equal the ``reward`` of the
row's successful ``/run`` answer that generated its turns (the fault layer's record). A rollout
whose turns no answer generated (none, dropped, invented: ``turns_generated``'s business) is
still held to its row: its reward must be one some successful ``/run`` of that row answered, so
a completed rollout with no turns and a reward for a row no ``/run`` answered fails. In native
style the collector sums ``env.step`` rewards itself, which the record does not tie to rows; with
no record of rewards at all, there is nothing to hold a reward against: NOT_JUDGED.
"""

from __future__ import annotations

from typing import ClassVar, Final

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.history import fingerprint
from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, not_judged, story, verdict
from pytest_rollout_chaos.invariants.served import Served, served

REWARD_TOLERANCE: Final = 1e-6


class RewardsRecorded:
    name: ClassVar[str] = "rewards_recorded"

    def check(self, observation: Observation) -> Verdict:
        if observation.rollouts is None:
            if observation.raised is not None:
                return verdict(self.name, Status.PASS, "the collector raised; no reward reached the trainer")
            return verdict(self.name, Status.UNKNOWN, "the collector neither returned nor raised")
        claimed = [r for r in observation.rollouts if r is not None and r.status != "aborted"]
        if not claimed:
            return not_judged(
                self.name, "no rollout hands back a reward to train on: every one came back aborted"
            )
        record = served(observation.history)
        if record.style == "native":
            return not_judged(
                self.name,
                "native style: a rollout's reward is the collector's sum of env.step answers, which the "
                "record does not tie to rows",
            )
        if record.style is None:
            return not_judged(
                self.name,
                f"{len(claimed)} rollouts hand back rewards, but the History holds no server-side record of "
                "/run answers (no fault layer in front of the servers?)",
            )
        if not any(call.reward is not None for calls in record.by_row.values() for call in calls):
            return not_judged(self.name, "no /run answer in the record carries a reward to compare with")
        problems = [problem for rollout in claimed if (problem := _problem(rollout, record)) is not None]
        if not problems:
            return verdict(
                self.name,
                Status.PASS,
                f"all {len(claimed)} completed or truncated rollouts hold a reward their own row's /run "
                "answered",
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=f"{len(problems)} rollouts carry a reward their row's /run did not answer",
                expected="each rollout's reward as its own row's /run answered it, never another row's",
            ),
            problems,
        )


def _problem(rollout: Rollout, record: Served) -> str | None:
    """Why ``rollout``'s reward is not one its row's ``/run`` answered; None when it is."""
    row = rollout.row_index
    answers = [call for call in record.calls(row) if call.succeeded and call.reward is not None]
    turns = [fingerprint(turn.generation_token_ids) for turn in rollout.turns]
    generating = [call.reward for call in answers if list(call.generations) == turns and turns]
    if generating:
        if any(_same(rollout.reward, reward) for reward in generating):
            return None
        return (
            f"row {row}: reward {rollout.reward!r}, but the row's /run that generated its turns "
            f"answered reward {generating[-1]!r}"
        )
    rewards = [call.reward for call in answers]
    if not rewards:
        return f"row {row}: reward {rollout.reward!r}, but no /run answered row {row} with a reward"
    if any(_same(rollout.reward, reward) for reward in rewards):
        return None
    return (
        f"row {row}: reward {rollout.reward!r}, but no /run answered row {row} with it "
        f"(its /run answered rewards {rewards})"
    )


def _same(handed: float, recorded: float | None) -> bool:
    return recorded is not None and abs(handed - recorded) <= REWARD_TOLERANCE
