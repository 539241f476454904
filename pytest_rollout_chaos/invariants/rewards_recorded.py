"""``rewards_recorded``: a rollout's reward is the reward its own row's ``/run`` answered with.

The trainer's advantage is computed from the reward, so a reward taken from another row (results
matched to rows in completion order), another attempt, or a default when a field was missing
trains the policy toward the wrong trajectory. Judged in gym style, where the reward is the
agent's, on every completed (or truncated) rollout: its reward must equal the ``reward`` of the
row's successful ``/run`` answer that generated its turns (the fault layer's record). When a row
has several attempts, the one handed on is the one whose generations and logprobs the rollout
carries: an attempt retried for bad logprobs may have generated the same ids, but not the same
finite logprobs, so the first attempt's reward beside the retry's turns fails. A rollout
whose turns no answer generated (none, dropped, invented: ``turns_generated``'s business) is
still held to its row: its reward must be one some successful ``/run`` of that row answered, so
a completed rollout with no turns and a reward for a row no ``/run`` answered fails. In native
style the collector sums the rewards ``env.step`` answered for the row, turn by turn: the reward
must be that sum as the environment recorded its answers (``step_batch_rewards``: each item's row
and reward), so a reward kept from an attempt thrown away, or an attempt scored and then replaced,
shows. A collector whose environment scores each trajectory by the resources server's ``/verify``
itself (SkyRL's loop) is held to the rewards those answers carried, as the fault layer recorded
them on the collector's own link, each tied to its row by the request's ``_rowidx``. With no
record of rewards at all, there is nothing to hold a reward against: NOT_JUDGED.
"""

from __future__ import annotations

from typing import ClassVar, Final

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.history import History, fingerprint, logprob_digest
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    not_judged,
    rollouts_to_judge,
    story,
    verdict,
)
from pytest_rollout_chaos.invariants.rules import digests_agree
from pytest_rollout_chaos.invariants.served import NATIVE_LINK_PREFIX, Served, served

REWARD_TOLERANCE: Final = 1e-6
VERIFY_OP: Final = "POST /verify"


class RewardsRecorded:
    name: ClassVar[str] = "rewards_recorded"

    def check(self, observation: Observation) -> Verdict:
        rollouts = rollouts_to_judge(
            observation, self.name, raised="the collector raised; no reward reached the trainer"
        )
        if isinstance(rollouts, Verdict):
            return rollouts
        claimed = [r for r in rollouts if r is not None and r.status != "aborted"]
        if not claimed:
            return not_judged(
                self.name, "no rollout hands back a reward to train on: every one came back aborted"
            )
        record = served(observation.history)
        if record.style == "native":
            return self._native(observation, claimed)
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

    def _native(self, observation: Observation, claimed: list[Rollout]) -> Verdict:
        answered = _env_rewards(observation.history)
        if answered is None:
            return not_judged(
                self.name,
                "native style: the environment's record ties no reward to a row (no step_batch_rewards "
                "with each item's row, no /verify answer on the collector's link), so the collector's sum "
                "of env.step answers has nothing to match",
            )
        problems = []
        for rollout in claimed:
            rewards = answered.get(rollout.row_index, [])
            if not _same(rollout.reward, sum(rewards)):
                problems.append(
                    f"row {rollout.row_index}: reward {rollout.reward!r}, but the environment answered the "
                    f"row rewards {rewards} (sum {sum(rewards)!r})"
                )
        if not problems:
            return verdict(
                self.name,
                Status.PASS,
                f"all {len(claimed)} completed or truncated rollouts hold the sum of the rewards the "
                "environment answered their row",
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=f"{len(problems)} rollouts carry a reward the environment did not answer their row",
                expected=(
                    "each rollout's reward as the sum of what env.step answered its row, once per turn "
                    "handed on, never a thrown-away attempt's score"
                ),
            ),
            problems,
        )


def _env_rewards(history: History) -> dict[int, list[float]] | None:
    """The rewards the environment answered, by row, in order: its ``/step_batch`` answers, else
    the ``/verify`` answers on the collector's own link; None when none is tied to a row."""
    found: dict[int, list[float]] = {}
    for event in history.events(source="resources", op="step_batch_rewards"):
        rows, rewards = event.data.get("rows"), event.data.get("rewards")
        if not isinstance(rows, list) or not isinstance(rewards, list):
            continue
        for row, reward in zip(rows, rewards, strict=False):
            _tie(found, row, reward)
    if not found:
        for event in history.events(kind="ok", op=VERIFY_OP):
            if str(event.data.get("link", "")).startswith(NATIVE_LINK_PREFIX):
                _tie(found, event.data.get("row"), event.data.get("reward"))
    return found or None


def _tie(found: dict[int, list[float]], row: object, reward: object) -> None:
    value = _number(reward)
    if isinstance(row, int) and not isinstance(row, bool) and value is not None:
        found.setdefault(row, []).append(value)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _problem(rollout: Rollout, record: Served) -> str | None:
    """Why ``rollout``'s reward is not one its row's ``/run`` answered; None when it is."""
    row = rollout.row_index
    answers = [call for call in record.calls(row) if call.succeeded and call.reward is not None]
    turns = [fingerprint(turn.generation_token_ids) for turn in rollout.turns]
    generating = [call for call in answers if list(call.generations) == turns and turns]
    if generating:
        logprobs = [logprob_digest(turn.generation_log_probs) for turn in rollout.turns]
        whole = [
            call
            for call in generating
            if len(call.logprobs) == len(logprobs) and all(map(digests_agree, call.logprobs, logprobs))
        ]
        taken = whole or generating  # the attempt handed on: its generations and its logprobs
        if any(_same(rollout.reward, call.reward) for call in taken):
            return None
        what = "generated its turns and their logprobs" if whole else "generated its turns"
        others = [call.reward for call in answers if call not in taken]
        return (
            f"row {row}: reward {rollout.reward!r}, but the row's /run that {what} answered reward "
            f"{taken[-1].reward!r}" + (f" (its other attempts answered {others})" if others else "")
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
