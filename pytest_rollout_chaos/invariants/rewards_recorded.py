"""``rewards_recorded``: a rollout's reward is the reward its own row's ``/run`` answered with.

The trainer's advantage is computed from the reward, so a reward taken from another row (results
matched to rows in completion order), another attempt, or a default when a field was missing
trains the policy toward the wrong trajectory. Judged in gym style, where the reward is the
agent's: a completed (or truncated) rollout's reward must equal the ``reward`` of the row's
successful ``/run`` answer that generated its turns (the fault layer's record). Which turns those
are is ``turns_generated``'s business; a rollout whose turns no answer generated is left to it.
In native style the collector sums ``env.step`` rewards itself, which the record does not tie to
rows: not judged (a PASS that says so).
"""

from __future__ import annotations

from typing import ClassVar, Final

from pytest_rollout_chaos.history import fingerprint
from pytest_rollout_chaos.invariants.base import Observation, Status, Verdict, story, verdict
from pytest_rollout_chaos.invariants.served import served

REWARD_TOLERANCE: Final = 1e-6


class RewardsRecorded:
    name: ClassVar[str] = "rewards_recorded"

    def check(self, observation: Observation) -> Verdict:
        if observation.rollouts is None:
            if observation.raised is not None:
                return verdict(self.name, Status.PASS, "the collector raised; no reward reached the trainer")
            return verdict(self.name, Status.UNKNOWN, "the collector neither returned nor raised")
        claimed = [r for r in observation.rollouts if r is not None and r.status != "aborted" and r.turns]
        if not claimed:
            return verdict(self.name, Status.PASS, "no rollout hands back a reward to train on")
        record = served(observation.history)
        if record.style == "native":
            return verdict(
                self.name,
                Status.PASS,
                "not judged in native style: a rollout's reward is the collector's sum of env.step answers, "
                "which the record does not tie to rows",
            )
        if record.style is None:
            return verdict(
                self.name,
                Status.UNKNOWN,
                f"{len(claimed)} rollouts hand back rewards, but the History holds no server-side record of "
                "/run answers (no fault layer in front of the servers?)",
            )
        if not any(call.reward is not None for calls in record.by_row.values() for call in calls):
            return verdict(
                self.name, Status.UNKNOWN, "no /run answer in the record carries a reward to compare with"
            )
        problems, checked = [], 0
        for rollout in claimed:
            turns = [fingerprint(turn.generation_token_ids) for turn in rollout.turns]
            rewards = [
                call.reward
                for call in record.calls(rollout.row_index)
                if call.succeeded and call.reward is not None and list(call.generations) == turns
            ]
            if not rewards:
                continue  # no answer generated these turns: turns_generated judges that
            checked += 1
            if not any(abs(rollout.reward - reward) <= REWARD_TOLERANCE for reward in rewards):
                problems.append(
                    f"row {rollout.row_index}: reward {rollout.reward!r}, but the row's /run that generated "
                    f"its turns answered reward {rewards[-1]!r}"
                )
        if not problems:
            return verdict(
                self.name,
                Status.PASS,
                f"{checked} of {len(claimed)} rollouts hold the reward their own /run answered "
                "(the rest have turns no answer generated)"
                if checked < len(claimed)
                else f"all {checked} rollouts hold the reward their own /run answered",
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
